"""`beam-embed export-model`: a checkpoint folder -> TF-Hub-format encoder + preprocessor
SavedModels (the conversion itself lives in beam_embed.models.export.convert).

May import: beam_embed.pipeline.common, models. Never another command package.
"""
