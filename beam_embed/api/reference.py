"""docs/api.md, made from the public names' docstrings: `python -m beam_embed.api.reference`
rewrites it (a test fails while it differs from what this makes)."""

from __future__ import annotations

import inspect
import os
import textwrap

# The reference's order: what a Beam user composes, what it returns, then the other doors.
ORDER = ("EmbedTexts", "Embedding", "DeadLetter", "WriteEmbeddings", "read_embeddings",
         "StoredEmbeddings", "EmbeddingModelHandler", "TextEmbeddings", "load_encoder",
         "TextEncoder")
HEADER = """# The Python API

`beam_embed`'s public names, for Beam pipelines and notebooks (README: "Use it from Python").
Their keyword arguments are `beam-embed run`'s settings under the same names, checked as the
command checks its flags. Made from the docstrings by `python -m beam_embed.api.reference`;
a test keeps this file in sync.
"""
PATH = os.path.join("docs", "api.md")


def _signature(obj) -> str:
    """The call's parameters, without annotations (the docstrings say what each takes; the
    package's type hints, py.typed, give them to type checkers and IDEs) and without the
    earlier names still taken with a DeprecationWarning."""
    from beam_embed.api.keywords import EARLIER_NAMES

    target = obj.__init__ if inspect.isclass(obj) else obj
    sig = inspect.signature(target)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()
              if not (inspect.isclass(obj) and p.name == "self") and p.name not in EARLIER_NAMES]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _call(name: str, obj) -> str:
    """`beam_embed.NAME(...)`, wrapped to the repository's line length in a code block."""
    wrapped = textwrap.wrap(f"beam_embed.{name}{_signature(obj)}", width=96,
                            subsequent_indent=" " * (len(name) + 12), break_long_words=False,
                            break_on_hyphens=False)
    return "```python\n" + "\n".join(wrapped) + "\n```"


def _methods(cls) -> list[tuple[str, object]]:
    """The public methods and properties a class of the API adds (not those of the Beam class
    it extends, such as a ModelHandler's)."""
    inherited = {name for base in cls.__mro__[1:] for name in vars(base)}
    return [(name, member) for name, member in vars(cls).items()
            if not name.startswith("_") and name not in inherited and member.__doc__
            and (inspect.isfunction(member) or isinstance(member, property))]


def reference() -> str:
    import beam_embed

    parts = [HEADER]
    for name in ORDER:
        obj = getattr(beam_embed, name)
        kind = "class" if inspect.isclass(obj) else "function"
        parts.append(f"## {kind} `beam_embed.{name}`\n\n{_call(name, obj)}\n\n"
                     f"{inspect.getdoc(obj)}\n")
        if inspect.isclass(obj):
            for method, member in _methods(obj):
                shown = "" if isinstance(member, property) else _signature(member).replace(
                    "(self, ", "(").replace("(self)", "()")
                parts.append(f"### `{name}.{method}{shown}`\n\n{inspect.getdoc(member)}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(reference())
