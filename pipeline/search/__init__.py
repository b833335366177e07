"""`beam-embed search`: the records of an embedding job's output closest in meaning to a query,
by an exact, bounded-memory scan of its Parquet shards (or a flat .npy index of them).

May import: beam_embed.pipeline.common, models, pyarrow, numpy. Never another command package.
"""
