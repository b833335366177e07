"""Marks the words a search hit shares with the query.

Words are runs of letters/digits (`\\w+`), matched case-insensitively and exactly (no stemming:
"cats" does not mark "cat"); a few very common English words are never marked. Styles: `bold`
(ANSI bold, the default on a terminal), `markdown` (`**word**`, the default when stdout is a file
or a pipe), `none`.
"""

from __future__ import annotations

import re

STYLES = {"bold": ("\033[1m", "\033[0m"), "markdown": ("**", "**"), "none": ("", "")}
WORD = re.compile(r"\w+")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was "
    "were will with".split())


def query_words(query: str) -> frozenset[str]:
    """The query's words worth marking, lower-cased."""
    return frozenset(w.lower() for w in WORD.findall(query)) - STOPWORDS


def highlight(text: str, words: frozenset[str], style: str) -> str:
    """`text` with every word in `words` wrapped in the style's markers."""
    if style not in STYLES:
        raise ValueError(f"unknown highlight style {style!r}; expected one of {sorted(STYLES)}")
    start, end = STYLES[style]
    if not words or not start:
        return text
    return WORD.sub(lambda m: f"{start}{m[0]}{end}" if m[0].lower() in words else m[0], text)
