"""The small inspection commands: `beam-embed tokens` (how models split the same text, how their
vocabularies differ) and `beam-embed similarity` (word-in-context similarity matrices).

May import: beam_embed.pipeline.common, models. Never another command package.
"""
