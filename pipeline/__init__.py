"""beam-embed's commands, one package each, above the pieces they share.

    cli.py      `beam-embed` dispatch: the command list, --version; imports the command it runs
    job/        the embedding job (`run`; `python -m beam_embed.pipeline.run` stays its entry point)
    pca/        the follow-up job (`pca`; also `python -m beam_embed.pipeline.pca`)
    search/     `search`          evaluate/   `eval`
    inspect/    `tokens`, `similarity`        export/     `export-model`
    cache/      `cache`: the model exports kept for every checkout and environment
    job/dataflow/  launching the job elsewhere: dry run, offline Dataflow job, shipping check
    common/     records, manifests, output formats, claim and staging, flag parsing, settings
                fields, runners (the project's Dask runner too), the sample corpus

How the process is set up (quiet libraries, exit codes, the job process's tuning) is
beam_embed.process, entered once by cli.py, run.py and pca/__main__.py.

Who may import whom (the .importlinter contract, checked in CI): cli (and beam_embed.api) ->
commands (never each other; job/dataflow/ imports none of the job's other modules) -> common ->
models -> beam_embed.process. Nothing here imports TensorFlow at module import time, and each
command's command.py parses its flags before importing Beam or numpy (fast --help).
"""
