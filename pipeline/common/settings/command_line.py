"""How every command reads its flags, the same way: `--a-b` and `--a_b` both work, no
abbreviations, `-v/--verbose` everywhere, and an unknown or misspelled flag is a one-line error
with a did-you-mean hint (a FlagError, a ValueError, which each command prints and exits 2 on).

Imports nothing heavy: `--help` and flag errors answer before Beam, numpy or TensorFlow load.
Commands that pass Beam's own options through (run, pca) check the rest against Beam's flags
with `beam_flags()`, which does import Beam.
"""

from __future__ import annotations

import argparse
import difflib

from beam_embed.process.private_apis.beam import add_beam_options, beam_argument_parser
from beam_embed.process.private_apis.beam_runner import dask_options
from beam_embed.process.private_apis.stdlib import (
    HelpFormatterHooks,
    add_option_string,
    option_strings,
)

VERBOSE_HELP = "show library log lines and full tracebacks (or set BEAM_EMBED_VERBOSE=1)"
SPELLING_NOTE = "Flags take either spelling: --some-flag or --some_flag."


class FlagError(ValueError):
    """A flag the command does not take, or a value argparse refuses; one line."""


def twin(flag: str) -> str | None:
    """`--a_b` -> `--a-b` (any underscore makes the all-dashes spelling), `--a-b` -> `--a_b`;
    None for a flag with one spelling."""
    if not flag.startswith("--") or not any(c in flag[2:] for c in "-_"):
        return None
    body = flag[2:]
    return "--" + (body.replace("_", "-") if "_" in body else body.replace("-", "_"))


def hint(bad: str, known) -> str:
    """'; did you mean --x?' for the closest known flags (either spelling), or ''."""
    name = bad.split("=", 1)[0].replace("_", "-")
    shown = sorted({k.replace("_", "-") if k.startswith("--") else k for k in known})
    scored = sorted(((difflib.SequenceMatcher(None, name, k).ratio(), k) for k in shown),
                    reverse=True)
    close = [k for r, k in scored[:2] if r >= max(0.6, scored[0][0] - 0.1)] if scored else []
    # an abbreviation (--comp) means the flags it starts, before any merely similar one (--prompt)
    started = [k for k in shown if k.startswith(name) and len(name) > 3]
    close = started[:2] if started else close
    return f"; did you mean {' or '.join(close)}?" if close else ""


def unknown_flag(bad: str, known, prog: str) -> FlagError:
    return FlagError(f"unknown flag {bad.split('=', 1)[0]!r}" +
                     (hint(bad, known) or f"; see `{prog} --help`"))


class HelpFormatter(HelpFormatterHooks):
    """One spelling per flag in the help (the dashed one), and each default that says
    something shown after the help text."""

    def shown_option_strings(self, action):
        strings = action.option_strings
        return [s for s in strings if not (twin(s) in strings and "_" in s[2:])]

    def help_text(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default in ([], "")
                or default is argparse.SUPPRESS or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """argparse with the conventions above. `parse(argv)` refuses anything it does not know;
    `parse(argv, passthrough=True)` returns the rest for the caller to check (Beam's options)."""

    def __init__(self, prog: str, description: str, epilog: str | None = None):
        super().__init__(prog=prog, description=description, allow_abbrev=False,
                         formatter_class=HelpFormatter,
                         epilog=SPELLING_NOTE + (f"\n{epilog}" if epilog else ""))
        self.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)

    def add_argument(self, *names, **kwargs):
        action = super().add_argument(*names, **kwargs)
        for flag in list(action.option_strings):  # --no-x of a BooleanOptionalAction included
            other = twin(flag)
            if other:
                add_option_string(self, action, other)
        return action

    def error(self, message):
        raise FlagError(message)

    def known_flags(self) -> set[str]:
        return option_strings(self)

    def parse(self, argv, passthrough: bool = False):
        args, rest = self.parse_known_args(argv)
        if passthrough:
            return args, rest
        if rest:
            flags = [r for r in rest if r.startswith("-")]
            if flags:
                raise unknown_flag(flags[0], self.known_flags(), self.prog)
            raise FlagError(f"unexpected argument {rest[0]!r}; see `{self.prog} --help`")
        return args


DASK_FLAGS = ("--dask_", "--dask-")  # Beam's DaskOptions


def mentions_dask(args) -> bool:
    """Whether any of `args` (flags, or --config keys) is one of Beam's Dask flags."""
    return any(str(a).startswith(DASK_FLAGS) or str(a).startswith("dask_") for a in args)


def beam_flags(dask: bool = True):
    """(Beam's argument parser with every PipelineOptions subclass imported so far, its flags);
    with `dask`, Beam's DaskOptions too (where dask is installed: importing them imports
    dask.distributed, ~0.8 s, so callers ask for them when a Dask flag is there). Imports
    Beam."""
    from apache_beam.options.pipeline_options import PipelineOptions

    if dask:
        try:
            dask_options()
        except ImportError:  # without the dask extra its flags stay unknown
            pass

    class Parser(beam_argument_parser()):
        def error(self, message):  # a bad value: one line, not usage + exit
            raise FlagError(message)

    parser = Parser(allow_abbrev=False)
    seen = {}
    for cls in PipelineOptions.__subclasses__():
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        add_beam_options(cls, parser)
    return parser, option_strings(parser)


def check_beam_args(rest: list[str], own: set[str], prog: str) -> list[str]:
    """`rest` (what the command's own parser left) when every flag in it is one of Beam's;
    else a FlagError naming the first unknown one, with hints from Beam's and the command's."""
    if not rest:
        return rest
    parser, known = beam_flags(dask=mentions_dask(rest))
    _, unknown = parser.parse_known_args(rest)
    if unknown:
        bad = next((u for u in unknown if u.startswith("-")), unknown[0])
        if not bad.startswith("-"):
            raise FlagError(f"unexpected argument {bad!r}; see `{prog} --help`")
        if bad.startswith(DASK_FLAGS) and not dask_installed():
            raise FlagError(without_dask(bad.split("=", 1)[0]))
        raise unknown_flag(bad, known | own, prog)
    return rest


def dask_installed() -> bool:
    try:
        dask_options()
    except ImportError:
        return False
    return True


def without_dask(what: str) -> str:
    """The one line for a Dask flag or runner in an installation without the dask extra."""
    from beam_embed.process.versions import install_command

    return f"{what} needs the dask extra, which this installation lacks: {install_command('dask')}"
