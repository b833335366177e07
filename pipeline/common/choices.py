"""The names job flags take, in one module that imports nothing: `beam-embed run --help` lists
them without loading Beam or numpy, and the readers, writers and manifest check against them."""

INPUT_FORMATS = ("text", "jsonl", "csv", "tsv", "parquet", "tfrecord")  # job.formats.READERS
FORMATS = ("parquet", "tfrecord")  # the job's writers (pipeline.job.sinks.WRITERS) by name
SPLIT_MODES = ("none", "sentences")
