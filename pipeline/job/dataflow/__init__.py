"""Launching elsewhere: the dry run's flags, building a Dataflow job offline (no network, no
credentials), describing it, checking that the staged package holds what the workers import,
and the warnings a launch deserves. It knows nothing of what the job computes: the job passes
its own `build(pipeline)` in. Part of the job it launches, below the rest of it.

May import: beam_embed.pipeline.common, models, Beam. Never the job's other modules (an import-linter
contract), nor another command package.
"""
