"""The Python API: what `beam_embed`'s public names are made of (docs/api.md lists them).

Above the commands in the layering (.importlinter): it composes the job's own stages (cleaning,
batching, the encoder's RunInference stage, the sinks, the manifest, the claim and the publish
swap) for Beam pipelines and notebooks, with the run's settings as keyword arguments.

A library leaves its host process as it found it: importing the API and constructing its
transforms changes no environment variable, warnings filter, logger or import hook, and loads
no TensorFlow (for a preset or an export-model folder). Where the model loads (the workers'
`load_model`, `load_encoder`'s first `encode`), TensorFlow loads without its start-up lines
unless the user asked for them (quiet.py); the `beam-embed` command tunes its own process at
its entry point instead (beam_embed.process.entry).
"""
