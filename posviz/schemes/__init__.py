"""How a model encodes position, from its config.json: rotary, ALiBi, relative, sinusoidal.

``config`` reads and checks config.json into a `Scheme`; ``rotary``, ``rope``, ``alibi`` and
``relative`` hold each family's formulas; ``layers`` a model's layer types; ``gguf`` what a GGUF
header's keys stand for; ``plan`` the rope rules at a longer context; ``diff`` where two sources
of one model's rotary positions part; ``presets`` known configs. Formulas only: the tensors a
scheme reads from a checkpoint are read by `posviz.models`, and the summary `posviz summary`
prints is made by `posviz.records`.
"""
