"""Launching elsewhere: the dry run's flags, building a Dataflow job offline (no network, no
credentials), describing it, checking that the staged package holds what the workers import,
and the warnings a launch deserves. It knows nothing of what the job computes: the job passes
its own `build(pipeline)` in.

May import: pipeline.common, models, Beam. Never a command package.
"""
