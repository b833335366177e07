"""`beam-embed cache`: what the model cache holds (exports of checkpoint presets, copies of gs://
models), and clearing it (the layout is beam_embed.models.export_cache's).

May import: beam_embed.pipeline.common, models. Never another command package.
"""
