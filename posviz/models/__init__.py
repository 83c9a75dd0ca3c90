"""Models read as their config.json (or a GGUF file's metadata) says."""
