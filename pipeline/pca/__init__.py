"""The follow-up job (`beam-embed pca`): exact PCA of an embedding job's output in one Beam pass,
projections of every record, a deterministic sample, and the exports people look at (TensorBoard
projector bundle, interactive HTML and static PNG plots, t-SNE/UMAP maps of the sample).

May import: beam_embed.pipeline.common, models, Beam, pyarrow, numpy, scikit-learn, plotting libraries.
Never another command package (beam_embed.pipeline.job, beam_embed.pipeline.search, ...).
"""
