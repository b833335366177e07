"""`beam-embed export-model SRC_DIR OUT_DIR [--name NAME] [--checkpoint PREFIX]
[--lower-case | --no-lower-case]`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="beam-embed export-model",
        description="Export a BERT-family checkpoint folder (Hugging Face, or google-research/bert "
                    "with a TF checkpoint) as TF-Hub-format encoder + preprocessor SavedModels "
                    "(OUT_DIR may be gs://).")
    parser.add_argument("src_dir", help="folder with config.json, weights, vocab.txt, or with "
                                        "bert_config.json, vocab.txt, a TF checkpoint")
    parser.add_argument("out_dir", help="where encoder/, preprocessor/, beam_embed.json go")
    parser.add_argument("--name", help="model name recorded in beam_embed.json and manifests")
    parser.add_argument("--checkpoint", metavar="PREFIX",
                        help="TF checkpoint prefix to read (e.g. model.ckpt-1000); default: the "
                             "latest a `checkpoint` file names, else bert_model.ckpt")
    parser.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=None,
                        help="lower-case (and strip accents) before WordPiece; default: what the "
                             "folder says, else inferred from vocab.txt")
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    from models.checkpoint import CheckpointError
    from models.export import export_checkpoint

    try:
        meta = export_checkpoint(args.src_dir, args.out_dir, name=args.name,
                                 checkpoint=args.checkpoint, lower_case=args.lower_case)
    except CheckpointError as e:
        print(f"beam-embed export-model: {e}", file=sys.stderr)
        return 2
    print(f"exported {meta['name']} ({meta['layers']} layers, width {meta['width']}, "
          f"pooling {meta['pooling']}{' + normalize' if meta['normalize'] else ''}, "
          f"{'uncased' if meta['lower_case'] else 'cased'}; "
          f"{len(meta['unused_variables'])} unused variables listed in beam_embed.json) "
          f"to {args.out_dir}")
    return 0
