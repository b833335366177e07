"""Where a Beam job runs: which runner a run gets (choice.py: Beam's in-process runner for a
local run; --runner DaskRunner the project's own, its scheduler checked before any data is
read) and the project's runner for dask.distributed clusters (dask/).

May import: beam_embed.pipeline.common.settings (flags, errors), beam_embed.process, Beam and
dask (inside functions where the modules say so). No other part of beam_embed.pipeline.common:
a runner runs whatever pipeline it is given. Importing the package imports nothing.
"""
