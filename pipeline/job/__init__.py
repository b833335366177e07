"""The embedding job (`beam-embed run`): its settings declared once in RunSettings (settings.py),
read from argv once (argv.py; Beam's options in beam_options.py), resolved with what needs I/O
(resolved.py: the encoder's spec, the input files, a previous run), the encoder's warm-up started
early in warm_start.py, sources and input formats, cleaning, length-sorted batching, the
RunInference stage, the Parquet/TFRecord/dead-letter sinks and the manifest, assembled by
build.py and run by command.py (`--dry-run` describes it instead); launching it elsewhere
(Dataflow, the dry run) in dataflow/.

May import: beam_embed.pipeline.common, models, Beam, pyarrow.
Never another command package. TensorFlow only inside functions, so flags are checked first.
"""
