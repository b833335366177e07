"""The ways sentence vectors can be stored (`--vector_dtype`; vector_dtypes.py writes and reads
each), in a module that imports nothing heavy: `beam-embed run --help` lists them without loading
numpy. float32 is the model's own."""

VECTOR_DTYPES = ("float32", "float16", "int8", "binary")
