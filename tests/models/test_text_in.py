"""Text-in embedders (USE v4, nnlm): recognized alone, the model sees each original string, the
vectors equal the numpy twin's; what they lack fails before any data is read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from beam_embed.models.encoders.detect import detect
from beam_embed.models.encoders.text_in import HubTextEncoder, units_with_offsets
from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.common.rows.records import Record
from beam_embed.pipeline.job.embed import estimated_tokens
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows, write_lines
from tests.models.test_bert_tf1 import cosines
from tests.text_in_fixture import build_text_in, reference

# Runs of spaces, tabs, a no-break space, leading and trailing blanks: all reach the model.
TEXTS = ["The man, in prison.", "  two  spaces\tand a tab ", "é à ü — ok!", "x",
         "a\u00a0no-break space", "one two three four five"]


def test_units_join_back_to_the_text_and_count_words():
    units, begin, end = units_with_offsets(TEXTS)
    joined = [b"".join(row).decode() for row in units.to_list()]
    assert joined == TEXTS
    assert units.row_lengths().numpy().tolist() == [4, 5, 5, 1, 3, 5]
    data = TEXTS[2].encode()
    assert [data[b:e].decode() for b, e in zip(begin[2].numpy(), end[2].numpy())] == \
        ["é", "à", "ü", "—", "ok!"]


@pytest.mark.parametrize("callable_module", [True, False])
def test_recognized_and_vectors_equal_numpy(tmp_path, callable_module):
    """`m(strings)` (USE v4's layout) and a serving_default-only module whose signature returns
    other outputs beside the vectors."""
    from tests.text_in_fixture import text_weights

    folder, weights = str(tmp_path / "m"), text_weights(seed=3)
    build_text_in(folder, weights, callable_module)
    assert detect(folder) == ("text_in", {})
    spec = encoder_spec(encoder=folder)
    assert (spec.kind, spec.poolings, spec.max_seq_length) == ("text_in", ("default",), None)
    got = spec.build().embed(TEXTS)
    assert cosines(got.vectors["default"], reference(weights, TEXTS)).min() >= 0.99999
    assert got.num_tokens.tolist() == [4, 5, 5, 1, 3, 5]  # words
    assert not got.truncated.any()


def test_a_word_limit_truncates_or_averages_windows(text_in):
    folder, weights = text_in
    text = "one two  three four five"
    cut = encoder_spec(encoder=folder, max_seq_length=2).build().embed([text])
    assert cut.truncated.tolist() == [True] and cut.num_tokens.tolist() == [5]
    assert cosines(cut.vectors["default"], reference(weights, ["one two  "]))[0] >= 0.99999
    windows = encoder_spec(encoder=folder, max_seq_length=2, long_text="chunk").build()
    got = windows.embed([text])
    parts = reference(weights, ["one two  ", "three four ", "five"])
    want = (2 * parts[0] + 2 * parts[1] + parts[2]) / 5  # weighted by words per window
    assert cosines(got.vectors["default"], want[None])[0] >= 0.99999


@pytest.mark.parametrize("flags, message", [
    ({"granularity": "token"}, "--granularity token is not available for text_in encoders (a "
                               "text-in embedder returns one vector per text, no token vectors)"),
    ({"poolings": ("mean@-2",)}, "unknown pooling 'mean@-2'; expected one of ['default'] (a "
                                 "text-in embedder returns one vector per text, the module's own)"),
    ({"poolings": ("cls",)}, "unknown pooling 'cls'; expected one of ['default']"),
    ({"precision": "bf16"}, "--precision bf16 is not available for text_in encoders"),
])
def test_what_it_lacks_fails_before_it_loads(flags, message):
    with pytest.raises(ValueError) as e:
        encoder_spec(encoder="/no/such/module", kind="text_in", **flags)
    assert message in str(e.value)


def test_not_a_text_in_embedder(tiny_export):
    with pytest.raises(ValueError, match="is not a text-in embedder: it is callable as "
                                         r"__call__\(input_mask: int32"):
        HubTextEncoder(f"{tiny_export}/encoder")


@pytest.mark.pipeline
def test_through_the_job_length_sorted_with_original_texts(text_in, tmp_path, monkeypatch):
    folder, weights = text_in
    seen = []
    encode = HubTextEncoder.encode

    def recording(self, units, layers=(), shape=None):
        seen.append([b"".join(row).decode() for row in units.rows()])
        return encode(self, units, layers, shape)

    monkeypatch.setattr(HubTextEncoder, "encode", recording)
    texts = TEXTS + [" ".join(["word"] * n) for n in (9, 2, 14, 5, 7)]
    corpus = write_lines(str(tmp_path / "c.txt"), texts)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--encoder", folder, "--no-clean",
                       "--batch_tokens", "12")
    assert manifest["model"]["kind"] == "text_in" and manifest["model"]["max_seq_length"] is None
    assert [p["column"] for p in manifest["poolings"]] == ["default"]
    rows, examples = parquet_rows(out), tfrecord_rows(out)
    want = reference(weights, texts)
    for i, text in enumerate(texts):
        row = rows[f"{corpus}:{i + 1}"]
        assert row["text"] == text and row["truncated"] is False
        assert row["num_tokens"] == len(text.split())
        assert cosines(row["default"], want[i]) >= 0.99999, text
        assert cosines(examples[row["id"]]["default"], want[i]) >= 0.99999
    batches = [b for b in seen if b != ["probe"]]  # the launcher's check comes first
    assert len(batches) > 2 and sorted(t for b in batches for t in b) == sorted(texts)
    # one sort window: batches in the order of the job's length estimate, first to last
    estimates = [estimated_tokens(Record("", t, "")) for b in batches for t in b]
    assert estimates == sorted(estimates), batches


@pytest.mark.pipeline
def test_refused_flags_fail_before_any_data_is_read(text_in, tmp_path, capsys):
    missing = str(tmp_path / "no-such-input.txt")
    for flags, reason in ((["--granularity", "token"], "no token vectors"),
                          (["--pooling", "mean@-2"], "the module's own")):
        code = cli(["run", "--input", missing, "--encoder", text_in[0], "--output",
                    str(tmp_path / "o"), *flags])
        assert code == 2 and reason in capsys.readouterr().err


@pytest.mark.pipeline
def test_search_eval_and_the_commands_that_need_tokens(text_in, tmp_path, capsys):
    folder, weights = text_in
    corpus = ["the cat sat on the mat", "money is big", "a river bank", "the dog ran",
              "interest rates rose", "a goal in extra time"]
    out = str(tmp_path / "out")
    run_job(out, "--input", write_lines(str(tmp_path / "c.txt"), corpus), "--encoder", folder,
            "--format", "parquet")
    assert cli(["search", out, "a cat on a mat", "-k", "3", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)[0]["hits"]
    stored, query = reference(weights, corpus), reference(weights, ["a cat on a mat"])[0]
    order = np.argsort(-cosines(stored, query[None]), kind="stable")[:3]
    assert [h["text"] for h in hits] == [corpus[i] for i in order]

    pairs = tmp_path / "pairs.tsv"
    gold = [4.0, 1.0, 2.5, 0.5, 3.0]
    pairs.write_text("".join(f"{g}\t{a}\t{b}\n" for g, a, b in
                             zip(gold, corpus, corpus[1:] + corpus[:1])))
    assert cli(["eval", "--pairs", str(pairs), "--model", folder, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    sims = cosines(reference(weights, corpus[:5]), reference(weights, corpus[1:6]))
    assert row["pooling"] == "default"
    assert row["spearman"] == pytest.approx(stats.spearmanr(sims, gold).statistic, abs=1e-6)

    assert cli(["tokens", "x", "--model", folder]) == 2
    assert "text_in encoders have no WordPiece vocabulary" in capsys.readouterr().err
    assert cli(["similarity", "a cat", "--words", "cat", "--model", folder]) == 2
    assert "no token vectors" in capsys.readouterr().err
