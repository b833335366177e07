"""The Python API: what `beam_embed`'s public names are made of (docs/api.md lists them).

Above the commands in the layering (.importlinter): it composes the job's own stages (cleaning,
batching, the encoder's RunInference stage, the sinks, the manifest, the claim and the publish
swap) for Beam pipelines and notebooks, with the run's settings as keyword arguments. Importing
it makes the libraries quiet, within the user's own set-up (quiet.py).
"""

from beam_embed.api.quiet import quiet_unless_asked

quiet_unless_asked()
