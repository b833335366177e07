"""The job flags' values, checked and turned into the encoder's spec, without Beam: what the
full parse (options.py -> config.py) and the early warm-up (early.py) both do with them."""

from __future__ import annotations

import os

import yaml

from models.spec import EncoderSpec, check_choice, check_positive, encoder_spec
from pipeline.common import output_formats
from pipeline.common.choices import INPUT_FORMATS, SPLIT_MODES
from pipeline.common.errors import one_line
from pipeline.common.flags import FlagError, hint


def csv_values(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


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


def check_plain_flags(opts) -> tuple[str, ...]:
    """The checks that need neither the model nor TensorFlow; the output formats."""
    formats, known = csv_values(opts.format), output_formats.names()  # the registry, as it is now
    bad = [f for f in formats if f not in known]
    if bad or not formats:
        raise ValueError(f"unknown format {(bad or [opts.format])[0]!r}; expected one or more of "
                         f"{list(known)}")
    check_choice("split", opts.split, SPLIT_MODES)
    if opts.input_format is not None:
        check_choice("input-format", opts.input_format, sorted(INPUT_FORMATS))
    for flag in ("max_text_bytes", "batch_tokens", "max_batch_size"):
        check_positive(flag.replace("_", "-"), getattr(opts, flag))
    return formats


def spec_of(opts, threads: tuple[int, int]) -> EncoderSpec:
    """The encoder's spec from the job's flags (may load TensorFlow to recognize a model)."""
    return encoder_spec(
        opts.model, encoder=opts.encoder, preprocessor=opts.preprocessor,
        poolings=csv_values(opts.pooling), normalize=opts.normalize,
        max_seq_length=opts.max_seq_length, long_text=opts.long_text,
        granularity=opts.granularity, token_layer=opts.token_layer, token_unit=opts.token_unit,
        token_dtype=opts.token_dtype, precision=opts.precision,
        options=(("signature", opts.elmo_signature),), threads=threads)
