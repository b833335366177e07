"""Pieces shared by the embedding job and the follow-up commands: the records that flow between
stages, the output folder's manifest (names, writing, reading, fingerprint), the tool's log
lines, and which Beam runner a local run gets.

May import: models, Beam, pyarrow, numpy. Never a command package (pipeline.job, pipeline.pca,
...) nor pipeline.dataflow; TensorFlow only inside functions.
"""
