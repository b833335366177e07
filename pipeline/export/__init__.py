"""`beam-embed export-model`: a checkpoint folder -> TF-Hub-format encoder + preprocessor
SavedModels (the conversion itself lives in models.export.convert).

May import: pipeline.common, models. Never another command package.
"""
