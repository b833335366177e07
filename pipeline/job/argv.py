"""A run's argv read once, without Beam (`read_job_argv`): `--config`'s keys first, the command
line winning, into RunSettings (settings.py, whose fields the job's flags are made from); what is
left (Beam's options, a config's keys for Beam) is checked and handed to Beam's PipelineOptions
by beam_options.py. `EmbedOptions` (beam_options.py) adds the same flags to Beam's parser, and
`beam-embed run --help` prints them from a plain one, so help needs neither Beam nor TensorFlow
(a test checks).
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from beam_embed.pipeline.common.settings.command_line import (
    SPELLING_NOTE,
    VERBOSE_HELP,
    FlagError,
    HelpFormatter,
    hint,
)
from beam_embed.pipeline.common.settings.errors import one_line
from beam_embed.pipeline.common.settings.setting_fields import add_flags
from beam_embed.pipeline.job import settings
from beam_embed.pipeline.job.dataflow.dry_run_flags import add_dry_run_flags
from beam_embed.pipeline.job.settings import RunSettings

BEAM_NOTE = """\
Beam's own options pass through: --runner, --direct_num_workers=2
--direct_running_mode=multi_processing, Dataflow's --project, --region, --temp_location, ...
(`beam-embed run --help-beam` lists them all). Flags on the command line win over --config keys.
""" + SPELLING_NOTE


def add_job_flags(parser) -> frozenset[str]:
    """Adds the job's flags (RunSettings' fields, and -v) to `parser`; returns their option
    strings (both spellings, --no-x)."""
    g = parser.add_argument_group("beam-embed")
    # the settings type as it is now: a test may extend it with a field of its own
    actions = add_flags(g, settings.RunSettings)
    actions.append(g.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP))
    return frozenset(s for a in actions for s in a.option_strings)


def help_parser() -> argparse.ArgumentParser:
    """The parser `beam-embed run --help` prints: the job's flags, --config, the dry run's, and
    where Beam's are. (Parsing itself goes through Beam's parser: beam_options.py.)"""
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


# Beam's flags with two names for one option
_ALIASES = {"extra_package": "extra_packages", "extra_packages": "extra_package"}
# A model named on the command line replaces the whole model a config names: its encoder and
# preprocessor handles (which would otherwise override --model) are the config's model's.
_REPLACED_WITH = {"model": ("encoder", "preprocessor")}


def _named(cli: list[str]) -> set[str]:
    """The keys the command line gives a value (a flag's underscored name; `--no-x` names x)."""
    names = set()
    for token in cli:
        if token.startswith("--") and len(token) > 2:
            name = token[2:].split("=", 1)[0].replace("-", "_")
            names |= {name, name.removeprefix("no_"), _ALIASES.get(name, name)}
    return names


def without_overridden(config: dict, cli: list[str]) -> dict:
    """The config's keys that the command line does not give: a flag given on the command line
    replaces its key, a list (--input, --extra_package) included, not added to it; --model
    replaces the config's encoder and preprocessor too."""
    named = _named(cli)
    replaced = {k for n in named for k in _REPLACED_WITH.get(n, ())} - named
    return {k: v for k, v in config.items()
            if (key := str(k).replace("-", "_")) not in named and key not in replaced}


class _JobParser(argparse.ArgumentParser):
    def error(self, message):  # a value argparse refuses: one line (a FlagError), no exit
        raise FlagError(message)


@dataclasses.dataclass(frozen=True)
class JobArgv:
    """A run's argv, read once. `settings` is None when the job's parser or a check refused a
    value: `error`, which beam_options.py raises after the checks that come first (a config key
    or flag unknown to Beam too)."""
    argv: tuple[str, ...]  # without --config
    config_path: str | None
    config: dict  # the --config file's keys, in its order, less those the command line gives
    config_argv: tuple[str, ...]  # the job's own keys as flags (every key, in the plain case)
    beam_keys: tuple[str, ...]  # config keys that are not the job's own (Beam's, or unknown)
    settings: RunSettings | None
    rest: tuple[str, ...] | None  # argv's arguments that are not the job's own; None: unknown
    error: ValueError | None = None

    @property
    def plain(self) -> bool:
        """Only the job's own flags, on the command line and in the config: a local run in this
        process, whose encoder's spec needs nothing of Beam's."""
        return self.settings is not None and not self.rest and not self.beam_keys


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
    config = without_overridden(read_config(pre_args.config), cli) if pre_args.config else {}
    parser = _JobParser(add_help=False, allow_abbrev=False)
    own = add_job_flags(parser)
    mine = {k: v for k, v in config.items() if "--" + k.replace("-", "_") in own}
    own_config = config_argv(pre_args.config, own, mine) if mine else []
    rest = None
    try:
        namespace, rest = parser.parse_known_args(own_config + cli)
        run, error = settings.RunSettings.from_namespace(namespace), None
    except ValueError as e:  # a FlagError, or a value the settings' checks refuse
        run, error = None, e
    return JobArgv(argv=tuple(cli), config_path=pre_args.config, config=config,
                   config_argv=tuple(own_config),
                   beam_keys=tuple(k for k in config if k not in mine), settings=run,
                   rest=None if rest is None else tuple(rest), error=error)
