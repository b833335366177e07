"""Reading pairs and triplets files: both pair layouts, robust line handling, clear errors."""

from __future__ import annotations

import pytest

from beam_embed.pipeline.evaluate.data import EvalDataError, read_pairs, read_triplets


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def test_three_column_pairs(tmp_path):
    path = _write(tmp_path, "p.tsv", "4.5\ta cat sat\tthe cat sat\r\n\n0\tdog\tbank\u2028x\n")
    pairs = read_pairs(path)
    assert pairs.layout == "pairs"
    assert pairs.scores == (4.5, 0.0)
    assert pairs.first == ("a cat sat", "dog")
    assert pairs.second == ("the cat sat", "bank\u2028x")  # only \n, \r\n, \r end a line
    assert len(pairs) == 2 and pairs.texts() == ["a cat sat", "dog", "the cat sat", "bank\u2028x"]


def test_sts_benchmark_layout_ignores_trailing_source_columns(tmp_path):
    lines = ["main-captions\tMSRvid\t2012test\t0000\t5.000\tA man is dancing.\tA man dances.",
             "main-news\theadlines\t2016\t0281\t2\tCourt limits power\tHigh court checks\t"
             "Europe Media Monitor\tEurope Media Monitor"]
    pairs = read_pairs(_write(tmp_path, "sts.tsv", "\n".join(lines) + "\n"))
    assert pairs.layout == "stsb"
    assert pairs.scores == (5.0, 2.0)
    assert pairs.first == ("A man is dancing.", "Court limits power")
    assert pairs.second == ("A man dances.", "High court checks")


def test_malformed_lines_are_reported_by_number(tmp_path):
    text = "1\ta\tb\n2\tonly two\n\nhigh\ta\tb\n3\ta\t \n" + "x\ty\tz\n" * 5
    with pytest.raises(EvalDataError) as e:
        read_pairs(_write(tmp_path, "bad.tsv", text))
    message = str(e.value)
    assert "line 2 has 2 fields" in message
    assert "line 4: score 'high' is not a number" in message
    assert "line 5: empty sentence" in message
    assert "(and 3 more)" in message and "score<TAB>sentence1<TAB>sentence2" in message


def test_missing_empty_and_too_small_files(tmp_path):
    with pytest.raises(EvalDataError, match="pairs file '.*nope.tsv' does not exist"):
        read_pairs(str(tmp_path / "nope.tsv"))
    with pytest.raises(EvalDataError, match="holds no pairs"):
        read_pairs(_write(tmp_path, "empty.tsv", "\n\n"))
    with pytest.raises(EvalDataError, match="at least 2"):
        read_pairs(_write(tmp_path, "one.tsv", "1\ta\tb\n"))
    (tmp_path / "latin.tsv").write_bytes(b"1\tcaf\xe9\tb\n2\ta\tb\n")
    with pytest.raises(EvalDataError, match="not UTF-8"):
        read_pairs(str(tmp_path / "latin.tsv"))


def test_triplets(tmp_path):
    trips = read_triplets(_write(tmp_path, "t.tsv", "q1\tp1\tn1\n\nq2\tp2\tn2\n"))
    assert (trips.queries, trips.positives, trips.negatives) == (("q1", "q2"), ("p1", "p2"),
                                                                 ("n1", "n2"))
    assert trips.texts() == ["q1", "q2", "p1", "p2", "n1", "n2"]
    with pytest.raises(EvalDataError, match=r"line 2 has 2 fields.*line 3: empty text"):
        read_triplets(_write(tmp_path, "bad.tsv", "q\tp\tn\nq\tp\nq\t\tn\n"))
