"""What a run's rows hold: the small frozen records that flow between the job's stages
(records.py), vectors as one matrix (vectors.py), and how each --vector_dtype stores and reads
back a pooling's vectors (vector_dtypes.py; its names alone, light enough for --help, in
vector_dtype_names.py).

May import: beam_embed.pipeline.common.settings (errors), beam_embed.process, numpy and pyarrow
(vector_dtypes.py and vectors.py at module level; records.py and vector_dtype_names.py import
neither: the input formats' registry and --help read them). No other part of
beam_embed.pipeline.common: the run folder, the formats and the stores build on these.
"""
