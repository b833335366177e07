"""The job's own flags, as a Beam PipelineOptions subclass; runner flags stay Beam's.

`--config FILE.yaml` supplies flags as keys (underscored names); flags on the command line win.
Unknown flags or keys are errors (Beam itself only warns and drops them).
"""

from __future__ import annotations

import argparse
import difflib

import yaml
from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

from models.choices import LONG_TEXT_MODES
from pipeline.common.manifest import FORMATS
from pipeline.dataflow.options import DryRunOptions
from pipeline.job.cleaning import SPLIT_MODES
from pipeline.job.formats import READERS


class EmbedOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        g = parser.add_argument_group("beam-embed")
        g.add_argument("--input", action="append", default=None,
                       help="file pattern (repeatable; local, gs://, .gz/.bz2). "
                            "Default: the bundled sample corpus")
        g.add_argument("--input_format", "--input-format",
                       help=f"one of {sorted(READERS)}; default: from each file's extension")
        g.add_argument("--text_field", "--text-field", default="text",
                       help="JSON/CSV/Parquet/TFRecord field with the text")
        g.add_argument("--id_field", "--id-field", help="field with a stable id (default path:line)")
        g.add_argument("--metadata_fields", "--metadata-fields", default="",
                       help="comma-separated fields carried to the output")
        g.add_argument("--split", default="none",
                       help=f"one of {list(SPLIT_MODES)}: split documents into sentences (pysbd)")
        g.add_argument("--clean", action=argparse.BooleanOptionalAction, default=True,
                       help="collapse whitespace/NBSP runs and trim")
        g.add_argument("--max_text_bytes", "--max-text-bytes", type=int, default=1 << 20,
                       help="longer texts are dead-lettered")
        g.add_argument("--model", default="minilm",
                       help="a preset from configs/models.yaml or an export-model folder")
        g.add_argument("--encoder", help="TF-Hub encoder handle (overrides --model)")
        g.add_argument("--preprocessor", help="TF-Hub preprocessor handle for --encoder")
        g.add_argument("--elmo_signature", "--elmo-signature", default="tokens",
                       help="ELMo: `tokens` (words and punctuation split properly) or `default` "
                            "(the module's own split on spaces)")
        g.add_argument("--granularity", default="sentence",
                       help="`sentence` (one vector per pooling) or `token` (tokens, offsets and "
                            "one vector per token)")
        g.add_argument("--token_layer", "--token-layer",
                       help="token vectors from this layer: BERT index (default -1), ELMo output "
                            "name (default elmo)")
        g.add_argument("--token_unit", "--token-unit", default="word",
                       help="BERT token unit: `word` (mean of its pieces) or `wordpiece`")
        g.add_argument("--token_dtype", "--token-dtype", default="float32",
                       help="token vectors in Parquet: float32 or float16 (half the size)")
        g.add_argument("--pooling", help="comma-separated poolings, e.g. cls,pooled_output,mean,"
                                         "mean@-2 (default: the model's recommended)")
        g.add_argument("--normalize", action=argparse.BooleanOptionalAction, default=None,
                       help="L2-normalize every vector (default: the model's recommendation)")
        g.add_argument("--max_seq_length", "--max-seq-length", type=int,
                       help="tokens per text incl. [CLS]/[SEP] (default: the model's)")
        g.add_argument("--long_text", "--long-text", default="truncate",
                       help=f"one of {list(LONG_TEXT_MODES)}: truncate (flagged) or average "
                            "overlapping windows")
        g.add_argument("--batch_tokens", "--batch-tokens", type=int, default=16384,
                       help="token budget of one inference batch")
        g.add_argument("--max_batch_size", "--max-batch-size", type=int, default=512)
        g.add_argument("--precision", default="fp32",
                       help="encoder compute precision: fp32 (exact), bf16 (CPUs with AMX/AVX-512 "
                            "bf16, GPUs; ~3-4x faster on AMX, cosine to fp32 > 0.9999) or fp16 "
                            "(GPUs); bf16/fp16 need an export-model encoder")
        g.add_argument("--output", default="output/embeddings", help="output folder (or gs://)")
        g.add_argument("--format", default="parquet,tfrecord",
                       help=f"comma-separated, of {list(FORMATS)}")
        g.add_argument("--num_shards", "--num-shards", type=int, default=0,
                       help="shards per format (0: the runner decides)")
        g.add_argument("--include_text", "--include-text", action=argparse.BooleanOptionalAction,
                       default=True, help="write the text beside its vectors")
        g.add_argument("--overwrite", action="store_true", help="replace an existing output")
        g.add_argument("--progress_every", "--progress-every", type=float, default=5.0,
                       help="seconds between progress lines on stderr (0: none)")


def _config_argv(path: str, known: set[str]) -> list[str]:
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a mapping of flag names to values")
    argv = []
    for key, value in config.items():
        flag = "--" + key.replace("-", "_")
        if flag not in known:
            raise ValueError(f"unknown key {key!r} in {path}; expected flags such as "
                             f"{_suggest(flag, known) or sorted(known)[:12]}")
        if isinstance(value, bool):
            negative = "--no-" + flag[2:]
            if value:
                argv.append(flag)
            elif negative in known:
                argv.append(negative)
        elif isinstance(value, list):
            if flag == "--input":
                for v in value:
                    argv += [flag, str(v)]
            else:
                argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


def _all_flags() -> tuple[_BeamArgumentParser, set[str]]:
    parser = _BeamArgumentParser(allow_abbrev=False)
    seen = {}
    for cls in PipelineOptions.__subclasses__():
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        cls._add_argparse_args(parser)
    return parser, {o for a in parser._actions for o in a.option_strings}


def _suggest(flag: str, known: set[str]) -> list[str]:
    return difflib.get_close_matches(flag.split("=", 1)[0], sorted(known), n=3)


def print_help() -> None:
    """`beam-embed run --help`: the job's flags and the dry run's."""
    parser = argparse.ArgumentParser(prog="beam-embed run")
    EmbedOptions._add_argparse_args(parser)
    DryRunOptions._add_argparse_args(parser)
    parser.print_help()


def parse(argv: list[str]) -> PipelineOptions:
    """argv (with an optional --config) -> PipelineOptions, refusing unknown flags."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre_args, rest = pre.parse_known_args(argv)
    parser, known = _all_flags()
    if pre_args.config:
        rest = _config_argv(pre_args.config, known) + rest
    _, unknown = parser.parse_known_args(rest)
    flags = [u for u in unknown if u.startswith("-")]
    if flags or unknown:
        bad = (flags or unknown)[0]
        hint = _suggest(bad, known)
        raise ValueError(f"unknown flag {bad!r}" + (f"; did you mean {hint}?" if hint else
                                                     "; see `beam-embed run --help`"))
    return PipelineOptions(rest)
