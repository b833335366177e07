"""How a beam-embed process is set up, tuned and ended: below every other package (it imports
nothing of beam_embed.pipeline or beam_embed.models, and nothing heavy at module import time:
`--help` goes through it), so the models can use it too.

    entry.py          `enter(command, argv)`: the one call at each process entry (the CLI's
                      console script, `python -m beam_embed.pipeline.run` / `.pca`); `set_up`,
                      its part every command needs (the CLI's `main` calls it for library callers)
    library_noise.py  libraries' log lines, warnings and C++ start-up lines off unless -v;
                      stderr silenced or held while a block runs
    log.py            the tool's own lines, and whether -v was asked (BEAM_EMBED_VERBOSE)
    terminal.py       text from an input made safe to print (escapes, not terminal commands)
    gcs_auth.py       gs:// credentials found in one look, or anonymous access said in one line
    gcs_endpoint.py   Cloud Storage reachable at all, checked once before the first gs:// request
    job_process.py    a job's own process: pandas and other runners' clients refused, the
                      garbage collector held off until the run starts
    imports.py        imports refused, for a process's life or while a block runs (TensorFlow's
                      eager Keras import: models/tf_import.py)
    local_runs.py     a local Beam run: state sampling period, worker processes (Ctrl-C, their
                      stderr)
    blas.py           numpy's BLAS threads, limited around a block of work
    exits.py          the exit codes, Ctrl-C recorded, the process ended without teardown
                      (os._exit after the atexit handlers and a flush)
    versions.py       an installed distribution's version without importing it, and the
                      `pip install` of an extra as this environment installed beam-embed
    private_apis/     every private API of Beam, google-auth, TF-Hub, argparse and atexit the
                      project touches, under a public name, each tested: one module per library

May import: the standard library at module level; Beam, google-auth, threadpoolctl inside
functions. Never beam_embed.pipeline or beam_embed.models (the .importlinter layers).
"""

from beam_embed.process.entry import enter, set_up

__all__ = ["enter", "set_up"]
