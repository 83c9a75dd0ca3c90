"""How a model encodes position, from its config.json: rotary, ALiBi, relative, sinusoidal.

``config`` reads and checks config.json into a `Scheme`; ``rotary``, ``alibi`` and ``relative``
hold each family's formulas; ``presets`` known configs; ``weights`` the few tensors a scheme
reads from a checkpoint (T5's bias, DeBERTa's table, a stored inv_freq); ``record`` the
summary `posviz summary` prints and `posviz rerun` recomputes.
"""
