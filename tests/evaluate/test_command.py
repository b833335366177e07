"""`beam-embed eval` end to end on the tiny export, against a numpy BERT and scipy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from beam_embed.pipeline.cli import main as cli
from tests.bert_reference import tiny_poolings

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

PAIRS = [(4.8, "the cat sat on the mat", "a cat sat on a mat"),
         (0.4, "money is big", "the river was small"),
         (3.0, "the dog sat", "a dog sat on the mat"),
         (1.2, "the bank is big", "a small cat"),
         (2.5, "the river bank", "the bank on the river"),
         (0.0, "play !", "money , money ?"),
         (4.1, "a big dog", "the big dog"),
         (1.9, "the cat was small", "the mat was big")]
TRIPLETS = [("the cat sat", "a cat sat on the mat", "money is money"),
            ("river bank", "the river was big", "play ?"),
            ("a big dog", "the dog was big", "the small cat sat"),
            ("money", "the bank is money", "a dog")]


def reference_vectors(weights, texts: list[str]) -> dict[str, np.ndarray]:
    """Every pooling of the tiny model for `texts`, by hand (numpy BERT)."""
    return tiny_poolings(weights, texts)[0]


def _cos(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = cli(["eval", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    pairs, triplets = tmp_path / "pairs.tsv", tmp_path / "triplets.tsv"
    pairs.write_text("".join(f"{s}\t{a}\t{b}\n" for s, a, b in PAIRS))
    triplets.write_text("".join("\t".join(t) + "\n" for t in TRIPLETS))
    return str(pairs), str(triplets)


def test_pairs_and_triplets_match_numpy_and_scipy(tiny_export, tiny_checkpoint, files, capsys):
    code, out, _ = _run(capsys, "--pairs", files[0], "--triplets", files[1], "--model",
                        tiny_export, "--pooling", "cls,pooled_output,mean,mean@-2", "--json")
    assert code == 0
    rows = json.loads(out)
    weights = tiny_checkpoint[1]
    first = reference_vectors(weights, [a for _, a, _ in PAIRS])
    second = reference_vectors(weights, [b for _, _, b in PAIRS])
    q, p, n = (reference_vectors(weights, [t[i] for t in TRIPLETS]) for i in range(3))
    gold = [s for s, _, _ in PAIRS]
    by_key = {(r["task"], r["pooling"]): r for r in rows}
    assert len(rows) == 8 and {r["name"] for r in rows} == {"tiny-bert"}
    for pooling in ("cls", "pooled_output", "mean", "mean@-2"):
        sims = _cos(first[pooling], second[pooling])
        row = by_key["pairs", pooling]
        assert row["n"] == len(PAIRS) and row["model"] == tiny_export
        assert row["spearman"] == pytest.approx(stats.spearmanr(sims, gold).statistic, abs=1e-6)
        # Pearson moves with the vectors' float32 rounding (the fused encoder's differs from the
        # numpy reference's by ~1e-6); the ranks behind Spearman do not.
        assert row["pearson"] == pytest.approx(stats.pearsonr(sims, gold).statistic, abs=1e-5)
        wins = _cos(q[pooling], p[pooling]) > _cos(q[pooling], n[pooling])
        assert by_key["triplets", pooling]["accuracy"] == pytest.approx(wins.mean())


def test_table_lists_every_model_and_pooling(tiny_export, files, capsys):
    code, out, _ = _run(capsys, "--pairs", files[0], "--model", tiny_export, "--pooling",
                        "cls,mean")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["model", "pooling", "pairs", "spearman", "pearson"]
    assert [line.split()[1:3] for line in lines[2:]] == [["cls", "8"], ["mean", "8"]]


@pytest.mark.parametrize("argv, message", [
    (["--pooling", "cls,bogus"], "unknown pooling 'bogus'; expected one of ['cls', 'lasttoken', "
                                 "'max', 'mean', 'mean_sqrt_len_tokens', 'pooled_output', "
                                 "'weightedmean']"),
    (["--pooling", "pooled_output@1"], "pooling 'pooled_output@1' takes no layer"),
    (["--pooling", "mean@5"], "asks for layer 5, but the model has 2 layers"),
])
def test_bad_pooling_fails_with_choices(tiny_export, files, capsys, argv, message):
    code, out, err = _run(capsys, "--pairs", files[0], "--model", tiny_export, *argv)
    assert code == 2 and out == "" and message in err


def test_bad_model_and_bad_file_fail_before_work(tiny_export, tmp_path, files, capsys):
    code, _, err = _run(capsys, "--pairs", files[0], "--model", "no-such-model")
    assert code == 2 and "unknown model 'no-such-model'; expected a preset, one of [" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\ta\tb\n2\ta\n")
    code, _, err = _run(capsys, "--pairs", str(bad), "--model", "no-such-model")
    assert code == 2 and "line 2 has 2 fields" in err  # the file is read before any model
    code, _, err = _run(capsys, "--triplets", str(tmp_path / "missing.tsv"))
    assert code == 2 and "missing.tsv' does not exist" in err


def test_without_files_the_sample_pairs_are_scored_and_nothing_is_written(
        tiny_export, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "--model", tiny_export, "--pooling", "mean", "--json")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["file"], row["n"], row["task"]) == ("(the sample pairs)", 300, "pairs")
    assert -1 <= row["spearman"] <= 1
    assert list(tmp_path.iterdir()) == []  # no output/sample/pairs.tsv in the user's folder


def _strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_degenerate_pairs_say_why_no_correlation_is_defined(tiny_export, tmp_path, capsys):
    same = tmp_path / "same.tsv"  # identical sentences: every cosine is 1
    same.write_text("".join(f"{s}\t{a}\t{a}\n" for s, a, _ in PAIRS))
    flat = tmp_path / "flat.tsv"  # one gold score for every pair
    flat.write_text("".join(f"3.0\t{a}\t{b}\n" for _, a, b in PAIRS))
    for path, why in [(same, "every pair's cosine is 1.0000: these vectors do not tell the "
                             "pairs apart"),
                      (flat, "every pair's gold score is 3: no correlation is defined")]:
        code, out, _ = _run(capsys, "--pairs", str(path), "--model", tiny_export,
                            "--vector-dtype", "float32,binary")
        assert code == 0 and "nan" not in out and "0.0000" not in out
        rows = [line.split() for line in out.splitlines()[2:4]]
        assert [r[-2:] for r in rows] == [["n/a", "n/a"]] * 2
        notes = [line for line in out.splitlines() if line.startswith("note: ")]
        assert [n.split(":")[1].split()[-1] for n in notes] == ["float32", "binary"]
        assert all(why in n for n in notes)
        code, out, _ = _run(capsys, "--pairs", str(path), "--model", tiny_export, "--json")
        [row] = _strict_json(out)
        assert row["spearman"] is None and row["pearson"] is None and why in row["note"]


def test_triplets_that_tie_are_said(tiny_export, tiny_checkpoint, tmp_path, capsys):
    ties = tmp_path / "ties.tsv"  # the positive is the negative: every cosine ties
    ties.write_text("".join(f"{q}\t{p}\t{p}\n" for q, p, _ in TRIPLETS))
    code, out, _ = _run(capsys, "--triplets", str(ties), "--model", tiny_export,
                        "--vector-dtype", "float32,binary")
    assert code == 0 and "0.0000" not in out and "nan" not in out
    assert out.count("n/a") == 2 and out.count(f"all {len(TRIPLETS)} triplets tie") == 2
    some = tmp_path / "some.tsv"  # one triplet of four ties; the rest are scored
    some.write_text("".join(f"{q}\t{p}\t{p if i == 1 else n}\n"
                            for i, (q, p, n) in enumerate(TRIPLETS)))
    code, out, _ = _run(capsys, "--triplets", str(some), "--model", tiny_export, "--json")
    [row] = _strict_json(out)
    weights = tiny_checkpoint[1]
    q, p, n = (reference_vectors(weights, [t[i] for t in TRIPLETS])["cls"] for i in range(3))
    wins = _cos(q, p) > _cos(q, n)
    wins[1] = False  # the tie: a miss
    assert row["ties"] == 1 and row["accuracy"] == pytest.approx(wins.mean())
    assert row["note"] == "1 of 4 triplets tie (the positive and the negative score the same " \
                          "cosine), counted as misses"
