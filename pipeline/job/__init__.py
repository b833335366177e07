"""The embedding job (`beam-embed run`): options and config (the flags' values without Beam in
flag_values.py, read early for the encoder's warm-up in early.py), sources and input formats,
cleaning, length-sorted batching, the RunInference stage, the Parquet/TFRecord/dead-letter sinks
and the manifest, assembled by build.py and run by command.py (`--dry-run` describes it
instead).

May import: pipeline.dataflow (launching elsewhere), pipeline.common, models, Beam, pyarrow.
Never another command package. TensorFlow only inside functions, so flags are checked first.
"""
