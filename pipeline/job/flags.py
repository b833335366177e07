"""The embedding job's own flags, on any argparse parser or group: `EmbedOptions` (options.py)
adds them to Beam's parser, and `beam-embed run --help` prints them from a plain one, so help
needs neither Beam nor TensorFlow (a test checks).

A run's argv is read once, without Beam (`read_job_argv`): `--config`'s keys first, the command
line winning, into a typed `JobFlags`; what is left (Beam's options, a config's keys for Beam) is
checked and handed to Beam's PipelineOptions by options.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from beam_embed.models.choices import ACCELERATORS, LONG_TEXT_MODES
from beam_embed.pipeline.common.choices import FORMATS, INPUT_FORMATS, SPLIT_MODES, VECTOR_DTYPES
from beam_embed.pipeline.common.errors import one_line
from beam_embed.pipeline.common.flags import (
    SPELLING_NOTE,
    VERBOSE_HELP,
    FlagError,
    HelpFormatter,
    hint,
)
from beam_embed.pipeline.job.dataflow.flags import add_dry_run_flags

BEAM_NOTE = """\
Beam's own options pass through: --runner, --direct_num_workers=2
--direct_running_mode=multi_processing, Dataflow's --project, --region, --temp_location, ...
(`beam-embed run --help-beam` lists them all). Flags on the command line win over --config keys.
""" + SPELLING_NOTE


def add_job_flags(parser) -> frozenset[str]:
    """Adds the job's flags to `parser`; returns their option strings (both spellings, --no-x)."""
    g = parser.add_argument_group("beam-embed")
    actions = []

    def add(*names, **kwargs):
        actions.append(g.add_argument(*names, **kwargs))

    add("--input", action="append", default=None,
        help="file pattern (repeatable; local, gs://, .gz/.bz2). "
             "Default: the bundled sample corpus")
    add("--input_format", "--input-format",
        help=f"one of {list(INPUT_FORMATS)}; default: from each file's extension")
    add("--text_field", "--text-field", default="text",
        help="JSON/CSV/Parquet/TFRecord field with the text")
    add("--id_field", "--id-field",
        help="field with a stable id (default: a field named id, else path:line)")
    add("--metadata_fields", "--metadata-fields",
        help="comma-separated fields carried to the output (default: the input's other "
             "fields of single values; '' carries none)")
    add("--split", default="none",
        help=f"one of {list(SPLIT_MODES)}: split documents into sentences (pysbd)")
    add("--clean", action=argparse.BooleanOptionalAction, default=True,
        help="collapse whitespace/NBSP runs and trim")
    add("--max_text_bytes", "--max-text-bytes", type=int, default=1 << 20,
        help="longer texts are dead-lettered")
    add("--model", default="minilm",
        help="a preset from configs/models.yaml, an export-model folder, or a "
             "SavedModel (TF-Hub URL, gs:// path or folder) of a recognized kind")
    add("--encoder", help="TF-Hub encoder handle (overrides --model); with "
                          "--preprocessor a BERT pair, alone its kind (ELMo, TF1 "
                          "BERT, text-in) is recognized from the module")
    add("--preprocessor", help="TF-Hub preprocessor handle for a BERT --encoder")
    add("--elmo_signature", "--elmo-signature", default="tokens",
        help="ELMo: `tokens` (words and punctuation split properly) or `default` "
             "(the module's own split on spaces)")
    add("--granularity", default="sentence",
        help="`sentence` (one vector per pooling) or `token` (tokens, offsets and "
             "one vector per token)")
    add("--token_layer", "--token-layer",
        help="token vectors from this layer: BERT index (default -1), ELMo output "
             "name (default elmo)")
    add("--token_unit", "--token-unit", default="word",
        help="BERT token unit: `word` (mean of its pieces) or `wordpiece`")
    add("--token_dtype", "--token-dtype", default="float32",
        help="token vectors in Parquet: float32 or float16 (half the size)")
    add("--vector_dtype", "--vector-dtype", default="float32",
        help=f"one of {list(VECTOR_DTYPES)}: how sentence vectors are stored (float16: "
             "half the size; int8: a quarter, ranges per dimension in the manifest; "
             "binary: one sign bit a dimension)")
    add("--pooling", help="comma-separated poolings, e.g. cls,pooled_output,mean,"
                          "mean@-2 (default: the model's recommended)")
    add("--normalize", action=argparse.BooleanOptionalAction, default=None,
        help="L2-normalize every vector (default: the model's recommendation)")
    add("--max_seq_length", "--max-seq-length", type=int,
        help="tokens per text incl. [CLS]/[SEP] (default: the model's)")
    add("--long_text", "--long-text", default="truncate",
        help=f"one of {list(LONG_TEXT_MODES)}: truncate (flagged) or average "
             "overlapping windows")
    add("--batch_tokens", "--batch-tokens", type=int, default=16384,
        help="token budget of one inference batch")
    add("--max_batch_size", "--max-batch-size", type=int, default=512,
        help="most texts in one inference batch, whatever the token budget")
    add("--precision", default=None,
        help="encoder compute precision: fp32 (exact; the default), bf16 (CPUs with "
             "AMX/AVX-512 bf16, GPUs, TPUs (their default); ~3-4x faster on AMX, cosine to "
             "fp32 > 0.9999) or fp16 (GPUs); bf16/fp16 need an export-model encoder")
    add("--accelerator", default="auto",
        help=f"one of {list(ACCELERATORS)}: auto (TensorFlow's placement: a visible GPU, "
             "else the CPU), gpu (refused without one), tpu (this VM's TPU: the encoder "
             "XLA-compiled in fixed batch shapes, bf16; BERT-family exports)")
    add("--output", default="output/embeddings", help="output folder (or gs://)")
    add("--format", default="parquet,tfrecord",
        help=f"comma-separated, of {list(FORMATS)}")
    add("--num_shards", "--num-shards", type=int, default=0,
        help="shards per format (0: the runner decides)")
    add("--include_text", "--include-text", action=argparse.BooleanOptionalAction,
        default=True, help="write the text beside its vectors")
    add("--dedupe", action="store_true",
        help="encode each distinct text once; every record still gets its row")
    add("--reuse", metavar="PREVIOUS_OUTPUT",
        help="copy the vectors of texts a previous run (local or gs://) embedded with the "
             "same model and settings instead of encoding them")
    add("--overwrite", action="store_true",
        help="replace an existing output (swapped in when the new run is complete); "
             "also takes over the claim a killed run left")
    add("--allow_incomplete_input", "--allow-incomplete-input", action="store_true",
        help="exit 0 even when an input file is cut short or corrupt (its rest is a "
             "dead letter either way)")
    add("--progress_every", "--progress-every", type=float, default=5.0,
        help="seconds between progress lines on stderr (0: none)")
    add("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    return frozenset(s for a in actions for s in a.option_strings)


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


# Beam's flags naming files of the project a config ships with, which Beam stages for the workers:
# a relative path there means "beside this config", so the config works from any folder.
CONFIG_RELATIVE = ("--setup_file", "--requirements_file", "--extra_package", "--extra_packages")
# Flags given once per value (Beam's extra_package appends), never as one comma-joined value.
REPEATED = ("--input", "--extra_package", "--extra_packages")


def _beside(config_path: str, value) -> str:
    value = str(value)
    if "://" in value or os.path.isabs(value):
        return value
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(config_path)), value))


def read_config(path: str) -> dict:
    """A `--config FILE.yaml`'s mapping; a ValueError for a file that cannot be read as one."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as e:  # missing file, bad YAML: bad configuration
        raise ValueError(f"--config {path}: {one_line(e)}") from e
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a mapping of flag names to values")
    return config


def config_argv(path: str, known: set[str], config: dict | None = None) -> list[str]:
    """A `--config FILE.yaml`'s keys (`config`, its mapping when already read) as command-line
    flags; a FlagError for a key that is not one of `known`, a ValueError for a file that cannot
    be read as a mapping. Relative paths in the CONFIG_RELATIVE keys are read from the config
    file's folder."""
    config = read_config(path) if config is None else config
    argv = []
    for key, value in config.items():
        flag = "--" + key.replace("-", "_")
        if flag not in known:
            raise FlagError(f"unknown key {key!r} in {path}" + (
                hint(flag, known) or "; expected a flag of `beam-embed run --help`"))
        if flag in CONFIG_RELATIVE:
            value = ([_beside(path, v) for v in value] if isinstance(value, list)
                     else _beside(path, value))
        if isinstance(value, bool):
            negative = "--no-" + flag[2:]
            if value:
                argv.append(flag)
            elif negative in known:
                argv.append(negative)
        elif isinstance(value, list):
            if flag in REPEATED:
                for v in value:
                    argv += [flag, str(v)]
            else:
                argv += [flag, ",".join(map(str, value))]
        else:
            argv += [flag, str(value)]
    return argv


@dataclasses.dataclass(frozen=True)
class JobFlags:
    """The job's own flags, as given (comma-separated lists stay strings: the checks name the
    value given). The one place the job reads them from."""
    input: tuple[str, ...]  # () without --input: the sample corpus
    input_format: str | None
    text_field: str
    id_field: str | None
    metadata_fields: str | None  # None: the input's fields decide (input_fields.py)
    split: str
    clean: bool
    max_text_bytes: int
    model: str
    encoder: str | None
    preprocessor: str | None
    elmo_signature: str
    granularity: str
    token_layer: str | None
    token_unit: str
    token_dtype: str
    vector_dtype: str
    pooling: str | None
    normalize: bool | None
    max_seq_length: int | None
    long_text: str
    batch_tokens: int
    max_batch_size: int
    precision: str | None
    accelerator: str
    output: str
    format: str
    num_shards: int
    include_text: bool
    dedupe: bool
    reuse: str | None
    overwrite: bool
    allow_incomplete_input: bool
    progress_every: float
    verbose: bool

    @classmethod
    def of(cls, namespace: argparse.Namespace) -> JobFlags:
        values = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls)}
        return cls(**{**values, "input": tuple(values["input"] or ())})


class _JobParser(argparse.ArgumentParser):
    def error(self, message):  # a value argparse refuses: one line (a FlagError), no exit
        raise FlagError(message)


@dataclasses.dataclass(frozen=True)
class JobArgv:
    """A run's argv, read once. `flags` is None when the job's parser refused a value: `error`,
    which options.py raises after the checks that come first (a config key or flag unknown to
    Beam too)."""
    argv: tuple[str, ...]  # without --config
    config_path: str | None
    config: dict  # the --config file's keys, in its order
    config_argv: tuple[str, ...]  # the job's own keys as flags (every key, in the plain case)
    beam_keys: tuple[str, ...]  # config keys that are not the job's own (Beam's, or unknown)
    flags: JobFlags | None
    rest: tuple[str, ...]  # argv's arguments that are not the job's own
    error: ValueError | None = None

    @property
    def plain(self) -> bool:
        """Only the job's own flags, on the command line and in the config: a local run in this
        process, whose encoder's spec needs nothing of Beam's."""
        return self.flags is not None and not self.rest and not self.beam_keys


class _TentativeParser(argparse.ArgumentParser):
    def error(self, message):  # the caller parses again for real, and that one says why
        raise ValueError(message)


def read_job_argv(argv: list[str], tentative: bool = False) -> JobArgv:
    """argv -> JobArgv, importing neither Beam nor TensorFlow. A --config file that cannot be read
    is a ValueError; `--config` without a value exits 2 (argparse's usage), or, `tentative`, is a
    ValueError too."""
    pre = (_TentativeParser if tentative else argparse.ArgumentParser)(
        add_help=False, allow_abbrev=False)
    pre.add_argument("--config")
    pre_args, cli = pre.parse_known_args(argv)
    config = read_config(pre_args.config) if pre_args.config else {}
    parser = _JobParser(add_help=False, allow_abbrev=False)
    own = add_job_flags(parser)
    mine = {k: v for k, v in config.items() if "--" + k.replace("-", "_") in own}
    own_config = config_argv(pre_args.config, own, mine) if mine else []
    try:
        namespace, rest = parser.parse_known_args(own_config + cli)
        flags, error = JobFlags.of(namespace), None
    except ValueError as e:  # FlagError
        flags, rest, error = None, [], e
    return JobArgv(argv=tuple(cli), config_path=pre_args.config, config=config,
                   config_argv=tuple(own_config),
                   beam_keys=tuple(k for k in config if k not in mine), flags=flags,
                   rest=tuple(rest), error=error)
