"""A finished run as its readers (pca, search, --reuse, the stores, the API's ReadEmbeddings)
see it: its JobManifest with each pooling's vector column, how it is stored and the shards'
full paths (embedding_set.py); the checks made on the manifest's shards before and after they
are read: present, undamaged, the very files the run wrote (shards.py); and whether a run whose
recorded fingerprint is not this model's holds this model's vectors all the same
(rows_agree.py).

May import: beam_embed.pipeline.common.run_folder (the manifest, the folder's names),
.output_formats (each format's readers), .rows, .settings, beam_embed.models, Beam, numpy and
pyarrow. Never .stores, which loads a finished run through this.
"""
