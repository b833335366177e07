"""Every private API of another library that the project relies on, one module per library;
call sites import from the library's module (`from beam_embed.process.private_apis.beam import
pickled`), so what a file relies on, and from whom, shows in its imports.

    beam.py         Beam: options, batching, sinks, TFRecord framing, pickling, staging,
                    credentials, the offline Dataflow client, bundle outputs
    beam_runner.py  Beam's runner internals behind the project's Dask runner
    google_auth.py  google-auth's Compute Engine check
    tf_hub.py       TF-Hub's marker of a TF1 Hub module
    stdlib.py       Python's argparse and atexit

Each is something no public API offers (why is said beside it), named under a public name;
tests/process/test_private_apis_*.py (one per module) check that each still exists with the
signature and the behaviour relied on, so an upgrade that changes one fails there, by name,
instead of somewhere in a run. Nothing heavy is imported at module import time: `--help` and flag
errors import the argparse part, and the libraries' pieces are imported by the functions that
hand them out. This package re-exports nothing.
"""
