"""Pieces shared by the embedding job and the follow-up commands: the records that flow between
stages, the output folder's manifest (names; JobManifest and PcaManifest, the only writers and
readers of manifest.json), a finished run as its readers see it (embedding_set.py), the output
formats (output_formats/: a module per format with its writer and readers, and their registry),
the claim on an output folder and the staging a run is swapped in from (claim.py,
claim_stores.py, staging.py), the checks readers make on the manifest's shards (shards.py),
errors as one line (errors.py), how every command parses its flags (command_line.py), settings
declared once as dataclass fields that are flags (setting_fields.py), the names --vector_dtype
takes (vector_dtype_names.py), which Beam runner a local run gets, and the sample corpus. How the
process itself is set up, tuned and ended (quiet libraries, exit codes, the private APIs of the
libraries) is beam_embed.process, below the models.

May import: models, beam_embed.process, Beam, pyarrow, numpy (command_line.py,
setting_fields.py, vector_dtype_names.py, the output_formats registry and its format modules and
errors.py import none of them at module level: --help needs them light). Never a command
package (beam_embed.pipeline.job, its dataflow/ included, beam_embed.pipeline.pca, ...);
TensorFlow only inside functions.
"""
