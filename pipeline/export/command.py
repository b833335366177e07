"""`beam-embed export-model SRC_DIR OUT_DIR [--name NAME] [--checkpoint PREFIX]
[--lower-case | --no-lower-case] [--overwrite]`; SRC_DIR may be a Hugging Face Hub id
(ORG/NAME[@REVISION]), downloaded first as `run --model ORG/NAME` downloads it."""

from __future__ import annotations

import argparse
import os
import sys

from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.settings.command_line import CommandParser, FlagError
from beam_embed.pipeline.common.settings.errors import one_line_errors, refused

PROG = "beam-embed export-model"


def parser() -> CommandParser:
    p = CommandParser(
        PROG, "Export a BERT-family checkpoint folder (Hugging Face BERT or XLM-RoBERTa, or "
              "google-research/bert "
              "with a TF checkpoint) as TF-Hub-format encoder + preprocessor SavedModels "
              "(OUT_DIR may be gs://).")
    p.add_argument("src_dir", help="folder with config.json, weights, vocab.txt (XLM-R: "
                                   "sentencepiece.bpe.model), or with bert_config.json, "
                                   "vocab.txt, a TF checkpoint; or a Hugging Face Hub id "
                                   "ORG/NAME[@REVISION] that names no local folder, downloaded "
                                   "into the model cache first (the `hub` extra)")
    p.add_argument("out_dir", help="where encoder/, preprocessor/, beam_embed.json go")
    p.add_argument("--name", help="model name recorded in beam_embed.json and manifests "
                                  "(default: the folder's, or a Hub id's NAME)")
    p.add_argument("--checkpoint", metavar="PREFIX",
                   help="TF checkpoint prefix to read (e.g. model.ckpt-1000); default: the "
                        "latest a `checkpoint` file names, else bert_model.ckpt")
    p.add_argument("--lower-case", action=argparse.BooleanOptionalAction, default=None,
                   help="lower-case (and strip accents) before WordPiece; default: what the "
                        "folder says, else inferred from vocab.txt")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the export OUT_DIR holds (refused without it, as `run` refuses "
                        "a previous run)")
    return p


def _present(path: str) -> bool:
    """A file or a folder at `path` (on object stores: an object under it)."""
    from beam_embed.models.hub_loader import is_remote

    if not is_remote(path):
        return os.path.lexists(path)
    from apache_beam.io.filesystems import FileSystems

    from beam_embed.pipeline.common.run_folder.literal_paths import objects_under

    return FileSystems.exists(path) or bool(objects_under(path, limit=1))


def check_out_dir(out_dir: str, overwrite: bool) -> None:
    """A ValueError, before TensorFlow loads, when `out_dir` holds what an export writes and
    not `overwrite`: a model folder a run or a preset reads is not replaced without asking."""
    from beam_embed.models.encoder_choices import PRECISIONS
    from beam_embed.models.export_format import (
        ENCODER,
        METADATA_FILE,
        PREPROCESSOR,
        precision_folder,
    )

    names = [METADATA_FILE, ENCODER, *(precision_folder(ENCODER, p) for p in PRECISIONS
                                       if p != "fp32"), PREPROCESSOR]
    found = [n for n in names if _present(os.path.join(out_dir, n))]
    if found and not overwrite:
        raise ValueError(f"OUT_DIR {out_dir!r} holds an export already ({', '.join(found)}); "
                         "pass --overwrite to replace it or choose another OUT_DIR")


def source(src_dir: str, name: str | None) -> tuple[str, str | None]:
    """The checkpoint folder to export and its name: a Hub id that names no local folder is
    downloaded (a HubError, a ValueError, in one line when it cannot be had)."""
    from beam_embed.models.hub_download import downloaded, hub_id, hub_name

    hub = hub_id(src_dir)
    if hub is None:
        return src_dir, name
    return downloaded(*hub), name or hub_name(hub[0])


@one_line_errors("beam-embed export-model")
def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse(sys.argv[1:] if argv is None else list(argv))
        check_out_dir(args.out_dir, args.overwrite)
        src_dir, name = source(args.src_dir, args.name)
    except (FlagError, ValueError) as e:
        return refused(PROG, e)
    import_tensorflow()
    from beam_embed.models.export.checkpoint import CheckpointError
    from beam_embed.models.export.convert import export_checkpoint

    try:
        meta = export_checkpoint(src_dir, args.out_dir, name=name,
                                 checkpoint=args.checkpoint, lower_case=args.lower_case)
    except CheckpointError as e:
        return refused(PROG, e)
    print(f"exported {meta['name']} ({meta['layers']} layers, width {meta['width']}, "
          f"pooling {meta['pooling']}{' + normalize' if meta['normalize'] else ''}, "
          f"{'uncased' if meta['lower_case'] else 'cased'}; "
          f"{len(meta['unused_variables'])} unused variables listed in beam_embed.json) "
          f"to {args.out_dir}")
    print(f'next: beam-embed run --model {args.out_dir}   or   beam-embed tokens "some text" '
          f"--model {args.out_dir}")
    return 0
