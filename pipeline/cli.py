"""`beam-embed`: one command, a subcommand per job. Dispatch only: each subcommand's module is
imported when it is asked for, and parses its own flags."""

from __future__ import annotations

import importlib
import sys

# Every command is a module with main(argv) -> exit code.
COMMANDS = {
    "run": "pipeline.job.command",
    "pca": "pipeline.pca.command",
    "eval": "pipeline.evaluate.command",
    "search": "pipeline.search.command",
    "tokens": "pipeline.inspect.tokens",
    "similarity": "pipeline.inspect.similarity",
    "export-model": "pipeline.export.command",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"beam-embed: unknown command {argv[0]!r}; expected one of {sorted(COMMANDS)}",
                  file=sys.stderr)
        print(f"usage: beam-embed {{{','.join(COMMANDS)}}} ...  (each takes --help)",
              file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
