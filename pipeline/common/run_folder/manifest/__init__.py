"""The output folder's manifest.json: its names and its bytes, and the typed manifests that are
the only code writing and reading it.

May import: the rest of beam_embed.pipeline.common.run_folder (buckets), .settings (errors),
Beam's FileSystems. Nothing outside run_folder imports this package's __init__ for a name: each
name has its one module.
"""
