"""The names job flags take, in one module that imports nothing heavy: `beam-embed run --help`
lists them without loading Beam or numpy, and the readers, writers and manifest check against
them."""

from beam_embed.pipeline.common.output_formats import names

INPUT_FORMATS = ("text", "jsonl", "csv", "tsv", "parquet", "tfrecord")  # job.formats.READERS
# The output formats' names when the help is built; checks ask the registry when they check
# (beam_embed.pipeline.common.output_formats), so a format registered later is accepted too.
FORMATS = names()
SPLIT_MODES = ("none", "sentences")
# How sentence vectors are stored (beam_embed.pipeline.common.vector_dtypes); float32 is the model's own.
VECTOR_DTYPES = ("float32", "float16", "int8", "binary")
