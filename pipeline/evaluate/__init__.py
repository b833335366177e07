"""`beam-embed eval`: which model and pooling make the best sentence vector, in numbers (STS-style
scored pairs: Spearman/Pearson of cosine similarity; triplets: accuracy), in one process.

May import: beam_embed.pipeline.common, models, numpy. Never another command package.
"""
