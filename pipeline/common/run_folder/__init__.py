"""The output folder's life, for every command that writes one: the exclusive claim a run takes
on it (claim.py; where the claim file lives, per filesystem: claim_stores.py), the staging
folder a run is written into and swapped in from (staging.py), the claim -> stage -> publish
span that `run`, `pca` and the API's WriteEmbeddings share (staged_run.py), the manifest and the
folder's names (manifest/, the only writer and reader of manifest.json), the job's shards
committed as they close (committed_shards.py), files written inside the bundles that make them
(bundle_write.py), each shard's size and SHA-256 taken as it is written (shard_digests.py), and
the paths underneath all of it: user-named paths used literally, never as glob patterns
(literal_paths.py), and a missing gs:// bucket said as such (buckets.py).

May import: beam_embed.pipeline.common.settings (errors), beam_embed.models (remote paths),
beam_embed.process and Beam. Never the output formats, the stores or a finished run's readers
(beam_embed.pipeline.common.output_formats, .stores, .finished_run): they build on this folder.
"""
