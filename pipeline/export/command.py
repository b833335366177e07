"""`beam-embed export-model SRC_DIR OUT_DIR [--name NAME]`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="beam-embed export-model",
        description="Export a Hugging Face BERT-family checkpoint folder as TF-Hub-format "
                    "encoder + preprocessor SavedModels (OUT_DIR may be gs://).")
    parser.add_argument("src_dir", help="folder with config.json, weights, vocab.txt")
    parser.add_argument("out_dir", help="where encoder/, preprocessor/, beam_embed.json go")
    parser.add_argument("--name", help="model name recorded in beam_embed.json and manifests")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
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
