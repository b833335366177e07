"""`beam-embed`: one command, a subcommand per job. Dispatch only: each subcommand's module is
imported when it is asked for, and parses its own flags."""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

from beam_embed.pipeline.common.settings.command_line import hint
from beam_embed.pipeline.common.settings.errors import take_debug_flag
from beam_embed.process import enter, set_up
from beam_embed.process.exits import exit_after

# Every command is a module with main(argv) -> exit code.
COMMANDS = {
    "run": ("beam_embed.pipeline.job.command", "embed a corpus into Parquet/TFRecord (default: the sample)"),
    "pca": ("beam_embed.pipeline.pca.command", "PCA of a run: plot.html, plot.png, TensorBoard projector"),
    "search": ("beam_embed.pipeline.search.command", "the records of a run closest in meaning to a query"),
    "eval": ("beam_embed.pipeline.evaluate.command", "score models and poolings on scored pairs or triplets"),
    "tokens": ("beam_embed.pipeline.inspect.tokens", "how models split a text into WordPieces"),
    "similarity": ("beam_embed.pipeline.inspect.similarity", "cosine similarity of words in context"),
    "export-model": ("beam_embed.pipeline.export.command", "a Hugging Face BERT-family checkpoint -> "
                                                "TF-Hub-format SavedModels"),
    "store": ("beam_embed.pipeline.store.command", "load a finished run into vector stores (LanceDB, "
                                                   "Qdrant, Milvus, pgvector)"),
    "cache": ("beam_embed.pipeline.cache.command", "list or clear the model cache (presets' "
                                                   "exports, gs:// model copies)"),
}
HELP_WORDS = ("-h", "--help", "help")


def version() -> str:
    from beam_embed.process.versions import installed_version

    return installed_version("beam-embed", "unknown (not installed: pip install -e .)")


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items()]
    return "\n".join([
        "usage: beam-embed COMMAND [flags]   (beam-embed COMMAND --help: its flags)", "",
        "commands:", *lines, "",
        "  -v, --verbose   after COMMAND: show library log lines and full tracebacks",
        "  --version       the installed version"])


def main(argv: list[str] | None = None, **kwargs) -> int:
    """`kwargs`: what the command's main takes beside argv (`run`: `read`, its argv as the
    process's entry read it)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print(usage(), file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    if name == "--version":
        print(f"beam-embed {version()}")
        return 0
    if name in HELP_WORDS:
        if name == "help" and rest and rest[0] in COMMANDS:  # `beam-embed help pca`
            return main([rest[0], "--help"])
        print(usage())
        return 0
    if name not in COMMANDS:
        print(f"beam-embed: unknown command {name!r}" + (
            hint(name, COMMANDS) or f"; expected one of {', '.join(COMMANDS)}") +
            " (beam-embed --help lists them)", file=sys.stderr)
        return 2
    set_up(rest)  # before any command imports TensorFlow
    return importlib.import_module(COMMANDS[name][0]).main(rest, **kwargs) or 0


def entry() -> NoReturn:
    """The `beam-embed` console script: the process set up for its command (a `run` process as
    the job's own: beam_embed.process.enter), main, then the process ends without the
    interpreter's teardown of TensorFlow and Beam (beam_embed.process.exits.exit_after; ~0.6-2 s
    on 2 cores). A `run`'s argv is read once here and handed to the command."""
    # --debug (-v for errors) is taken before `run`'s argv is read here, which knows no such flag
    argv = take_debug_flag(sys.argv[1:])
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    kwargs = {}
    if command == "run":
        from beam_embed.pipeline.job.warm_start import read_at_entry

        kwargs["read"] = read_at_entry(rest)
    read = kwargs.get("read")
    enter(command, rest, local=read is not None and read.plain)
    exit_after(lambda: main(argv, **kwargs))


if __name__ == "__main__":
    entry()
