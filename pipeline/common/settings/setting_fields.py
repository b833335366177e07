"""Settings declared once: a frozen dataclass whose fields are a command's flags.

A field made by `setting(default, help=..., choices=..., check=...)` carries its flag (`--name`,
also spelled `--name-with-dashes`; `--no-name` too for a boolean whose default is true or unset),
its help, the values it takes and its check in its metadata; its type annotation says what a
value is (`int | None`: an integer or unset; `tuple[str, ...]`: comma-separated on the command
line, a list in a config file or from Python; `tuple[str, ...] | None`: such a list or unset, the
empty list given as ''). `add_flags` puts the fields on an argparse parser
or group, and constructing the dataclass (`Settings.__post_init__`) normalizes and checks every
field, so a Python caller, a command line and a config file go through one check, and a bad value
is a ValueError naming it and what is expected.

Imports nothing heavy: `--help` builds its flags from here.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import types
import typing
from collections.abc import Callable

_META = "beam_embed.setting"
_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


@dataclasses.dataclass(frozen=True)
class Declared:
    """What `setting` declares of a field beside its default."""

    help: str
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None  # callable: asked late
    check: Callable[[str, object], None] | None = None  # (name, value); raises ValueError
    repeat: bool = False  # a list given by repeating the flag, never comma-separated
    metavar: str | None = None
    tidy: Callable[[object], object] | None = None  # applied to a given value before the checks

    def allowed(self) -> tuple[str, ...] | None:
        return tuple(self.choices()) if callable(self.choices) else self.choices


def setting(default=None, *, help: str, choices=None, check=None, repeat: bool = False,
            metavar: str | None = None, tidy=None):
    """A settings field: its default and how it is given and checked (see the module's doc)."""
    return dataclasses.field(default=default, metadata={_META: Declared(
        help, choices, check, repeat, metavar, tidy)})


@dataclasses.dataclass(frozen=True)
class Kind:
    """A field's value type, from its annotation."""

    base: type  # str, int, float or bool
    optional: bool  # None allowed: unset
    many: bool  # a tuple of `base`


def _kind(hint) -> Kind:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return dataclasses.replace(_kind(next(a for a in args if a is not type(None))),
                                   optional=type(None) in args)
    if typing.get_origin(hint) is tuple:
        return Kind(args[0], False, True)
    return Kind(hint, False, False)


@functools.cache
def declared_fields(cls) -> tuple[tuple[dataclasses.Field, Declared, Kind], ...]:
    """Each `setting` field of the dataclass `cls`, in order, with its declaration and kind."""
    hints = typing.get_type_hints(cls)
    return tuple((f, f.metadata[_META], _kind(hints[f.name])) for f in dataclasses.fields(cls)
                 if _META in f.metadata)


def flag(name: str) -> str:
    """The spelling messages name a field by: also its config key and its Python keyword."""
    return f"--{name}"


def positive(name: str, value) -> None:
    if value < 1:
        raise ValueError(f"{flag(name)} must be a positive integer, got {value!r}")


def _typed(name: str, value, base: type):
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, base) or (base is int and isinstance(value, bool)):
        raise ValueError(f"{flag(name)} must be {_WORDS[base]}, got {value!r}")
    return value


def _items(name: str, value, repeat: bool) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value] if repeat else value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{flag(name)} must be a list of strings, got {value!r}")
    return tuple(v.strip() for v in value if v.strip())


def _check_choices(name: str, value, allowed: tuple[str, ...], many: bool) -> None:
    if not many:
        if value not in allowed:
            raise ValueError(f"unknown {flag(name)} {value!r}; expected one of {list(allowed)}")
        return
    bad = [v for v in value if v not in allowed]
    if bad or not value:
        raise ValueError(f"unknown {flag(name)} {(bad or [','.join(value)])[0]!r}; expected one "
                         f"or more of {list(allowed)}")


def _normal(name: str, value, declared: Declared, kind: Kind):
    if value is None and kind.optional:  # unset, for a list too (`''` is the empty list)
        return None
    if kind.many:
        value = _items(name, value, declared.repeat)
    else:
        value = _typed(name, value, kind.base)
    if declared.tidy is not None:
        value = declared.tidy(value)
    allowed = declared.allowed()
    if allowed is not None:
        _check_choices(name, value, allowed, kind.many)
    if declared.check is not None:
        declared.check(name, value)
    return value


class Settings:
    """The base of a frozen dataclass of `setting` fields: constructing one normalizes each
    field (a comma-separated string or a list into a tuple, an int into a float where a number
    is expected) and checks it, then `check_together` checks the fields against each other."""

    def __post_init__(self):
        for f, declared, kind in declared_fields(type(self)):
            object.__setattr__(self, f.name, _normal(f.name, getattr(self, f.name), declared, kind))
        self.check_together()

    def check_together(self) -> None:
        """Checks across fields, after each field's own: a ValueError naming the values."""

    @classmethod
    def from_namespace(cls, namespace: argparse.Namespace):
        """The settings an argparse parse made by `add_flags` holds (a ValueError if a check
        fails)."""
        return cls(**{f.name: getattr(namespace, f.name) for f, _, _ in declared_fields(cls)})


def _help(declared: Declared, kind: Kind) -> str:
    allowed = declared.allowed()
    if allowed is None:
        return declared.help
    if kind.many:
        return f"comma-separated, of {list(allowed)}: {declared.help}"
    return f"one of {list(allowed)}: {declared.help}"


def add_flags(parser, cls) -> list[argparse.Action]:
    """Adds a flag for each field of `cls` to `parser` (an argparse parser or group): both
    spellings, argparse's type from the annotation; the namespace's names are the fields'."""
    actions = []
    for f, declared, kind in declared_fields(cls):
        names = [flag(f.name)] + ([flag(f.name.replace("_", "-"))] if "_" in f.name else [])
        kwargs = {"dest": f.name, "help": _help(declared, kind), "default": f.default}
        if kind.base is bool and not kind.many:
            kwargs["action"] = ("store_true" if f.default is False
                                else argparse.BooleanOptionalAction)
        elif declared.repeat:
            kwargs.update(action="append", default=None)
        elif kind.many and f.default is not None:
            kwargs["default"] = ",".join(f.default)
        elif kind.base in (int, float):
            kwargs["type"] = kind.base
        if declared.metavar:
            kwargs["metavar"] = declared.metavar
        actions.append(parser.add_argument(*names, **kwargs))
    return actions
