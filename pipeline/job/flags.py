"""The embedding job's own flags, on any argparse parser or group: `EmbedOptions` (options.py)
adds them to Beam's parser, and `beam-embed run --help` prints them from a plain one, so help
needs neither Beam nor TensorFlow (a test checks)."""

from __future__ import annotations

import argparse

from models.choices import LONG_TEXT_MODES
from pipeline.common.choices import FORMATS, INPUT_FORMATS, SPLIT_MODES
from pipeline.common.flags import SPELLING_NOTE, VERBOSE_HELP, HelpFormatter
from pipeline.dataflow.flags import add_dry_run_flags

BEAM_NOTE = """\
Beam's own options pass through: --runner, --direct_num_workers=2
--direct_running_mode=multi_processing, Dataflow's --project, --region, --temp_location, ...
(`beam-embed run --help-beam` lists them all). Flags on the command line win over --config keys.
""" + SPELLING_NOTE


def add_job_flags(parser) -> None:
    g = parser.add_argument_group("beam-embed")
    g.add_argument("--input", action="append", default=None,
                   help="file pattern (repeatable; local, gs://, .gz/.bz2). "
                        "Default: the bundled sample corpus")
    g.add_argument("--input_format", "--input-format",
                   help=f"one of {list(INPUT_FORMATS)}; default: from each file's extension")
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
                   help="a preset from configs/models.yaml, an export-model folder, or a "
                        "SavedModel (TF-Hub URL, gs:// path or folder) of a recognized kind")
    g.add_argument("--encoder", help="TF-Hub encoder handle (overrides --model); with "
                                     "--preprocessor a BERT pair, alone its kind (ELMo, TF1 "
                                     "BERT, text-in) is recognized from the module")
    g.add_argument("--preprocessor", help="TF-Hub preprocessor handle for a BERT --encoder")
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
    g.add_argument("--max_batch_size", "--max-batch-size", type=int, default=512,
                   help="most texts in one inference batch, whatever the token budget")
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
    g.add_argument("--overwrite", action="store_true",
                   help="replace an existing output (swapped in when the new run is complete); "
                        "also takes over the claim a killed run left")
    g.add_argument("--allow_incomplete_input", "--allow-incomplete-input", action="store_true",
                   help="exit 0 even when an input file is cut short or corrupt (its rest is a "
                        "dead letter either way)")
    g.add_argument("--progress_every", "--progress-every", type=float, default=5.0,
                   help="seconds between progress lines on stderr (0: none)")
    g.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)


def help_parser() -> argparse.ArgumentParser:
    """The parser `beam-embed run --help` prints: the job's flags, --config, the dry run's, and
    where Beam's are. (Parsing itself goes through Beam's parser: options.py.)"""
    parser = argparse.ArgumentParser(
        prog="beam-embed run", usage="beam-embed run [flags] [Beam options]",
        formatter_class=HelpFormatter, add_help=False, epilog=BEAM_NOTE,
        description="Embed a corpus: Parquet/TFRecord shards, errors-*.jsonl and manifest.json "
                    "in --output.")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    parser.add_argument("--help-beam", action="store_true", help="list Beam's own options")
    parser.add_argument("--config", metavar="FILE.yaml",
                        help="any of the flags below as keys (underscored names)")
    add_job_flags(parser)
    add_dry_run_flags(parser)
    return parser


def print_help() -> None:
    help_parser().print_help()
