"""Pieces shared by the embedding job and the follow-up commands: the records that flow between
stages, the output folder's manifest (names; JobManifest and PcaManifest, the only writers and
readers of manifest.json), the registry of output formats (output_formats.py), the claim on an
output folder and the staging a run is swapped in from (claim.py, claim_stores.py, staging.py),
the checks readers make on the manifest's shards (shards.py), errors as one line (errors.py),
how every command parses its flags (flags.py) and the choices they list (choices.py), which Beam
runner a local run gets, the Parquet sink both the job and pca write with (parquet_sink.py), and
the sample corpus. How the process itself is set up, tuned and ended (quiet libraries, exit
codes, the private APIs of the libraries) is beam_embed.process, below the models.

May import: models, beam_embed.process, Beam, pyarrow, numpy (flags.py, choices.py,
output_formats.py and errors.py import none of them at module level: --help needs them light).
Never a command package (beam_embed.pipeline.job, its dataflow/ included,
beam_embed.pipeline.pca, ...); TensorFlow only inside functions. The output formats' entries name
their writers (in beam_embed.pipeline.job) and readers (in beam_embed.pipeline.pca) as strings
that only those commands import.
"""
