"""Corpus text made safe for a terminal: what is escaped, what is left alone."""

from __future__ import annotations

import json

import pytest

from beam_embed.process.terminal import json_printable, printable


@pytest.mark.parametrize("raw, shown", [
    ("red \x1b[31mtext\x1b[0m", r"red \x1b[31mtext\x1b[0m"),  # colour (CSI)
    ("\x1b]0;title\x07after", r"\x1b]0;title\x07after"),  # window title (OSC ... BEL)
    ("\x1b]8;;http://x\x1b\\link", r"\x1b]8;;http://x\x1b\link"),  # hyperlink, ST ending
    ("c1 \x9b2J \x9d0;t\x9c \x85", r"c1 \x9b2J \x9d0;t\x9c \x85"),  # C1: CSI, OSC, ST, NEL
    ("nul\x00 del\x7f bs\x08", r"nul\x00 del\x7f bs\x08"),
    ("line\nbreak\ttab\rreturn", r"line\nbreak\ttab\rreturn"),
    ("abc \u202eevil\u202c \u2066iso\u2069", r"abc \u202eevil\u202c \u2066iso\u2069"),
    ("one\u2028two\u2029three", r"one\u2028two\u2029three"),
])
def test_controls_are_shown_as_escapes(raw, shown):
    assert printable(raw) == shown


def test_ordinary_text_is_left_exactly_as_it_is():
    text = "Café 中文 עברית ‎mark 😀 back\\slash \"quotes\" \u00a0nbsp \u200bzero-width"
    assert printable(text) == text


def test_json_text_decodes_to_the_same_value_and_prints_no_control():
    value = [{"id": "c1\x9b2J", "text": "a\x1b[31mb\u202ec\x7f\u2028d\ne", "n": 3}]
    for indent in (None, 2):
        dumped = json.dumps(value, ensure_ascii=False, indent=indent)
        safe = json_printable(dumped)
        assert json.loads(safe) == value
        assert printable(safe.replace("\n", "")) == safe.replace("\n", "")  # nothing raw left
        assert "\\u009b2J" in safe and "\\u202ec" in safe
    assert json_printable('{"t": "中文"}') == '{"t": "中文"}'


def test_log_lines_show_control_characters_and_keep_their_line_breaks(capsys):
    from beam_embed.process.log import log

    log("skipped 'bad\x1b]0;title\x07.txt'\nsecond line")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "'bad\\x1b]0;title\\x07.txt'\nsecond line\n" in err
