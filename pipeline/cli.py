"""`beam-embed`: one command, a subcommand per job. Each subcommand keeps its own flags."""

from __future__ import annotations

import argparse
import importlib
import sys


def _export_model(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="beam-embed export-model",
        description="Export a Hugging Face BERT-family checkpoint folder as TF-Hub-format "
                    "encoder + preprocessor SavedModels (OUT_DIR may be gs://).")
    parser.add_argument("src_dir", help="folder with config.json, weights, vocab.txt")
    parser.add_argument("out_dir", help="where encoder/, preprocessor/, beam_embed.json go")
    parser.add_argument("--name", help="model name recorded in beam_embed.json and manifests")
    args = parser.parse_args(argv)
    from models.checkpoint import CheckpointError
    from models.export import export_checkpoint

    try:
        meta = export_checkpoint(args.src_dir, args.out_dir, name=args.name)
    except CheckpointError as e:
        print(f"beam-embed export-model: {e}", file=sys.stderr)
        return 2
    print(f"exported {meta['name']} ({meta['layers']} layers, width {meta['width']}, "
          f"pooling {meta['pooling']}{' + normalize' if meta['normalize'] else ''}) "
          f"to {args.out_dir}")
    return 0


# Every other command is a module with main(argv) -> exit code, imported only when asked for.
MODULES = {
    "run": "pipeline.run",
    "pca": "pipeline.pca",
    "eval": "pipeline.evaluate",
    "search": "pipeline.search",
    "tokens": "pipeline.compare_tokens",
    "similarity": "pipeline.similarity",
}
COMMANDS = {"export-model": _export_model,
            **{name: (lambda argv, m=module: importlib.import_module(m).main(argv) or 0)
               for name, module in MODULES.items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"beam-embed: unknown command {argv[0]!r}; expected one of {sorted(COMMANDS)}",
                  file=sys.stderr)
        print(f"usage: beam-embed {{{','.join(COMMANDS)}}} ...  (each takes --help)",
              file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
