"""Text from a corpus (or any input) made safe to print on a terminal.

A record's text or id can hold bytes a terminal obeys instead of showing: ESC starts colour,
cursor and window-title sequences (CSI `ESC [`, OSC `ESC ]`, ended by BEL or `ESC \\`), and a
terminal may read the C1 codes U+0080-U+009F (U+009B is CSI) the same way. Bidirectional
overrides and isolates (U+202A-U+202E, U+2066-U+2069) reorder what follows them on the line,
so a printed score or id can be made to read as something else. `printable` shows each of these
as a Python-style escape (`\\x1b`, `\\x9b`, `\\u202e`): unlike U+FFFD it says which character it
was, unlike the Control Pictures (`␛`) it covers C1 and bidi codes too and cannot be mistaken for
a character of the text, and it is what `repr` and most tools print, so it can be searched for in
the source file. Line and paragraph separators (U+2028/U+2029) are escaped as well: the line a
caller prints stays one line.

`json_printable` does the same inside JSON text: escapes that decode to the same string, so a
JSON reader still gets the text exactly (json.dumps with ensure_ascii=False escapes only C0).
"""

from __future__ import annotations

import re

_BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_JSON_UNESCAPED = re.compile(f"[{_BEYOND_C0}]")  # json.dumps escapes C0 itself
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    char = match[0]
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """`text` with every control, line-separator and bidi-override character shown as a visible
    escape (`\\x1b`, `\\u202e`); newlines and tabs too (`\\n`, `\\t`), so the result is one
    line."""
    return _CONTROL.sub(_escape, text)


def _json_escape(match: re.Match) -> str:
    return f"\\u{ord(match[0]):04x}"


def json_printable(dumped: str) -> str:
    """JSON text (json.dumps output) with the same characters as \\uXXXX escapes: the same JSON
    value, safe on a terminal. Outside strings JSON has only ASCII structure and whitespace
    (newlines of `indent` among them, left alone), and json.dumps escapes C0 inside strings
    itself, so only the strings' DEL, C1, separator and bidi characters change."""
    return _JSON_UNESCAPED.sub(_json_escape, dumped)
