"""The embedding job (`beam-embed run`): its flags read once into JobFlags (flags.py; their
checks and the encoder's spec in flag_values.py, Beam's options in options.py, the validated job
in config.py, the encoder's warm-up started early in early.py), sources and input formats,
cleaning, length-sorted batching, the RunInference stage, the Parquet/TFRecord/dead-letter sinks
and the manifest, assembled by build.py and run by command.py (`--dry-run` describes it
instead); launching it elsewhere (Dataflow, the dry run) in dataflow/.

May import: beam_embed.pipeline.common, models, Beam, pyarrow.
Never another command package. TensorFlow only inside functions, so flags are checked first.
"""
