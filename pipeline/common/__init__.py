"""Pieces shared by the embedding job and the follow-up commands: the records that flow between
stages, the output folder's manifest (names, writing, reading, fingerprint), how every command
parses its flags (flags.py) and the choices they list (choices.py), the tool's log lines and
the libraries' silence (quiet.py), which Beam runner a local run gets, and the sample corpus.

May import: models, Beam, pyarrow, numpy (flags.py, choices.py and quiet.py import none of them
at module level: --help needs them light). Never a command package (pipeline.job, pipeline.pca,
...) nor pipeline.dataflow; TensorFlow only inside functions.
"""
