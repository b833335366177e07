"""How a command takes its settings and says what went wrong: every command's flag parsing
(command_line.py), settings declared once as dataclass fields that are flags (setting_fields.py),
errors as one line and their exit codes (errors.py), and the bundled sample corpus that a run
without --input reads (sample_corpus.py).

May import: beam_embed.process and the standard library only, none of the other parts of
beam_embed.pipeline.common (every one of them may import this). Nothing heavy at module level:
--help and flag errors answer before Beam, numpy or TensorFlow load (command_line.py imports
Beam inside `beam_flags()` only).
"""
