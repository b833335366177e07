"""Pieces shared by the embedding job and the follow-up commands, in parts named for what they
hold:
- settings/: how a command takes its settings and fails: flag parsing, settings declared once as
  dataclass fields that are flags, errors as one line, the bundled sample corpus;
- rows/: what a run's rows hold: the records that flow between the job's stages, vector
  matrices, how each --vector_dtype stores vectors;
- run_folder/: the output folder's life: the claim, the staging a run is swapped in from, the one
  claim -> stage -> publish span, the manifest (manifest/: JobManifest and PcaManifest, the only
  writers and readers of manifest.json), the job's committed shards, shard digests, files
  written inside bundles, user-named paths used literally;
- output_formats/: a module per format with its encoding, writer and readers, and their
  registry;
- finished_run/: a finished run as its readers see it (embedding_set.py) and the checks they
  make on its shards;
- stores/: the vector stores a finished run is loaded into;
- runners/: which Beam runner a run gets, and the project's runner for dask.distributed
  clusters (runners/dask/).
How the process itself is set up, tuned and ended (quiet libraries, exit codes, the private APIs
of the libraries) is beam_embed.process, below the models.

The parts import each other one way only (the acyclic contract of .importlinter checks it):
settings <- rows <- run_folder <- output_formats <- finished_run <- stores (run_folder does not
need rows), and runners on settings alone; each part's __init__ says what it may import.

May import: models, beam_embed.process, Beam, pyarrow, numpy (settings/, rows/records.py,
rows/vector_dtype_names.py, the output_formats registry and its format modules import none of
them at module level: --help needs them light). Never a command package
(beam_embed.pipeline.job, its dataflow/ included, beam_embed.pipeline.pca, ...); TensorFlow
only inside functions.
"""
