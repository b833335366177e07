"""The output folder's manifest.json and the names around it (the model's fingerprint in it is
its encoder kind's: beam_embed.models.spec).

Every manifest.json is written and read through its typed class, `JobManifest` (`beam-embed
run`: job.py) or `PcaManifest` (`beam-embed pca`: pca.py), each with its own format version,
both made of the typed entries in entries.py; the folder's names, what a command writes there
(`OutputKind`) and the manifest's bytes (written, read, hashed) are folder.py's. The output
folder's checks (beam_embed.pipeline.common.run_folder.staging) read any command's manifest
leniently, through the classes' `recognizes` and `listed_in`.

May import: the rest of beam_embed.pipeline.common.run_folder (buckets), .settings (errors) and
Beam's FileSystems; inside the package entries.py imports nothing of the project's, folder.py
none of the manifests, pca.py entries and folder, job.py all three. Importing the package
imports nothing: each name has its one module.
"""
