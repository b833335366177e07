"""--split chunks: each document as overlapping windows of at most N tokens of the model's
tokenizer, cut at words, one row each with its parent and its offsets into the text as read;
each window's vector is its text's embedded alone. Counted here with the model's own
tokenizer.json (Hugging Face `tokenizers`), independently of the export's preprocessor."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow.parquet as pq
import pytest
import tokenizers

from beam_embed import read_embeddings
from beam_embed.pipeline.cli import main as cli
from beam_embed.pipeline.job.chunking import windows
from beam_embed.process import exits
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows

pytestmark = pytest.mark.pipeline  # whole runs, end to end

N, M = 24, 6
WORDS = ("the river bank was flooded after heavy rain, and residents moved furniture upstairs; "
         "meanwhile the café owner counted losses. Insurance adjusters arrived on Tuesday")
DOCS = {
    "short": "A café by the river.",
    "long": " ".join([WORDS] * 4),
    # runs of spaces, a tab, newlines and no-break spaces inside; ends on spaces
    "spaced": "Résumé  of\tthe   meeting:\n\nthe budget\u00a0was approved.\u3000Next steps "
              "follow, " + WORDS + "   ",
    # a word longer than a window: cut inside, each part a window of its own
    "url": "see https://example.com/" + "/".join("abcdefghijklmnopqrstuvwxyz") +
           "/index.html for details " + WORDS,
}


def _corpus(path, docs) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i, text in docs.items():
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def reference(minilm_checkpoint):
    ref = tokenizers.Tokenizer.from_file(os.path.join(minilm_checkpoint, "tokenizer.json"))
    ref.no_truncation()
    ref.no_padding()
    return lambda text: len(ref.encode(text, add_special_tokens=False).ids)


@pytest.fixture(scope="module")
def chunked(minilm_export, tmp_path_factory):
    base = tmp_path_factory.mktemp("chunks")
    corpus = _corpus(base / "docs.jsonl", DOCS)
    out = str(base / "out")
    manifest = run_job(out, "--input", corpus, "--model", minilm_export, "--split", "chunks",
                       "--chunk_tokens", str(N), "--chunk_overlap", str(M),
                       "--max_seq_length", "64")
    return corpus, out, manifest


def _by_doc(rows) -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for row in rows.values():
        docs.setdefault(row["parent_id"], []).append(row)
    return {k: sorted(v, key=lambda r: r["chunk_index"]) for k, v in docs.items()}


def test_chunks_cover_each_document_within_the_window(chunked, reference):
    _, out, manifest = chunked
    docs = _by_doc(parquet_rows(out))
    assert set(docs) == set(DOCS)
    assert manifest["counts"]["embedded"] == sum(len(v) for v in docs.values())
    assert len(docs["short"]) == 1 and len(docs["long"]) > 5
    for doc, rows in docs.items():
        text = DOCS[doc]
        covered = np.zeros(len(text), bool)
        for k, row in enumerate(rows):
            start, end = row["char_start"], row["char_end"]
            assert row["id"] == f"{doc}#c{k}" and row["chunk_index"] == k
            assert row["text"] == text[start:end] and row["text"] == row["text"].strip()
            assert reference(row["text"]) <= N, row["text"]
            assert row["num_tokens"] == reference(row["text"]) + 2 and not row["truncated"]
            # cut between words: the characters either side are a space or the text's end
            assert start == 0 or text[start - 1].isspace() or doc == "url", (doc, k)
            assert end == len(text) or text[end].isspace() or doc == "url", (doc, k)
            covered[start:end] = True
        missed = "".join(c for c, hit in zip(text, covered) if not hit)
        assert missed.strip() == "", (doc, missed)
        starts = [r["char_start"] for r in rows]
        assert starts == sorted(set(starts))
    url = DOCS["url"]
    inside = [r for r in docs["url"] if r["char_end"] < len(url)
              and not url[r["char_end"]].isspace()]
    assert len(inside) >= 2  # the long word's parts but the last end inside it


def test_consecutive_windows_share_about_the_overlap(chunked, reference):
    _, out, _ = chunked
    docs = _by_doc(parquet_rows(out))
    words = {w: reference(w) for w in re.findall(r"\S+", WORDS)}
    longest = max(words.values())  # the back-off stops at a word that would pass M
    shared = []
    for rows in (docs["long"], docs["spaced"]):
        for a, b in zip(rows, rows[1:]):
            both = DOCS[rows[0]["parent_id"]][b["char_start"]:a["char_end"]]
            assert b["char_start"] < a["char_end"]
            shared.append(reference(both))
    assert all(M - longest < n <= M for n in shared), shared


def test_each_window_is_its_text_embedded_alone(chunked, minilm_export):
    from beam_embed.models.spec import encoder_spec

    _, out, manifest = chunked
    column = manifest["poolings"][0]["column"]
    rows = list(parquet_rows(out).values())
    embedder = encoder_spec(minilm_export, max_seq_length=64).build()
    for row in rows:
        alone = embedder.embed([row["text"]]).vectors[column][0]
        got = np.asarray(row[column], np.float32)
        cos = float(got @ alone / np.linalg.norm(got) / np.linalg.norm(alone))
        assert cos >= 0.99999, (row["id"], cos)


def test_a_prompt_leaves_room_in_every_window(chunked, minilm_export, reference, tmp_path):
    """The encoder prepends the prompt to each window: by default a window holds what the
    model's length leaves after the special tokens and the prompt's."""
    corpus = chunked[0]
    out = str(tmp_path / "prompted")
    run_job(out, "--input", corpus, "--model", minilm_export, "--split", "chunks",
            "--max_seq_length", "64", "--prompt", "query: ", "--format", "parquet")
    rows = parquet_rows(out)
    assert reference("query: ") == 2
    assert max(r["num_tokens"] for r in rows.values()) == 64
    assert not any(r["truncated"] for r in rows.values())
    assert all(reference(r["text"]) <= 60 for r in rows.values())
    assert len([r for r in rows.values() if r["parent_id"] == "long"]) >= 2


def test_tfrecord_rows_carry_the_same_places(chunked):
    _, out, _ = chunked
    parquet, examples = parquet_rows(out), tfrecord_rows(out)
    assert set(parquet) == set(examples)
    for rid, row in parquet.items():
        ex = examples[rid]
        assert (ex["parent_id"], ex["chunk_index"], ex["char_start"], ex["char_end"]) == \
            (row["parent_id"], row["chunk_index"], row["char_start"], row["char_end"])
    table = pq.read_table(next(os.path.join(out, f) for f in sorted(os.listdir(out))
                               if f.endswith(".parquet")))
    assert [str(table.schema.field(c).type) for c in
            ("parent_id", "chunk_index", "char_start", "char_end")] == \
        ["string", "int64", "int64", "int64"]


def test_dedupe_gives_every_chunk_its_row(chunked, minilm_export, tmp_path):
    corpus, out, _ = chunked
    twice = _corpus(tmp_path / "twice.jsonl", {**DOCS, "copy": DOCS["long"]})
    deduped = str(tmp_path / "deduped")
    manifest = run_job(deduped, "--input", twice, "--model", minilm_export, "--split", "chunks",
                       "--chunk_tokens", str(N), "--chunk_overlap", str(M),
                       "--max_seq_length", "64", "--dedupe", "--format", "parquet")
    column = manifest["poolings"][0]["column"]
    first, again = parquet_rows(out), parquet_rows(deduped)
    copies = [r for r in again.values() if r["parent_id"] == "copy"]
    originals = {r["chunk_index"]: r for r in first.values() if r["parent_id"] == "long"}
    assert len(copies) == len(originals)
    counts = manifest["counts"]
    assert counts["encoded"] == len(first) < counts["embedded"] == len(again)
    for row in copies:
        original = originals[row["chunk_index"]]
        assert row["id"] == f"copy#c{row['chunk_index']}"
        assert (row["text"], row["char_start"], row["char_end"]) == \
            (original["text"], original["char_start"], original["char_end"])
        np.testing.assert_allclose(row[column], original[column], atol=1e-6)
    for rid, row in first.items():
        np.testing.assert_allclose(again[rid][column], row[column], atol=1e-6)


def test_reuse_copies_known_chunks_and_the_store_gets_their_places(chunked, minilm_export,
                                                                   tmp_path, capsys):
    import lancedb
    from qdrant_client import QdrantClient

    _, out, first_manifest = chunked
    column = first_manifest["poolings"][0]["column"]
    grown = _corpus(tmp_path / "grown.jsonl", {**DOCS, "new": "A new document " + WORDS[::-1]})
    again = str(tmp_path / "again")
    lance, qdrant = str(tmp_path / "lance"), str(tmp_path / "qdrant")
    manifest = run_job(again, "--input", grown, "--model", minilm_export, "--split", "chunks",
                       "--chunk_tokens", str(N), "--chunk_overlap", str(M),
                       "--max_seq_length", "64", "--reuse", out, "--format", "parquet",
                       "--store", f"lancedb://{lance}", "--store", f"qdrant://{qdrant}")
    first, rows = parquet_rows(out), parquet_rows(again)
    new = [r for r in rows.values() if r["parent_id"] == "new"]
    assert new and set(rows) == set(first) | {r["id"] for r in new}
    assert manifest["counts"]["reused"] == len(first)
    for rid, row in first.items():
        assert rows[rid]["char_start"] == row["char_start"]
        np.testing.assert_array_equal(rows[rid][column], row[column])
    places = {rid: (r["parent_id"], r["chunk_index"], r["char_start"], r["char_end"])
              for rid, r in rows.items()}
    table = lancedb.connect(lance).open_table("embeddings")
    assert str(table.schema.field("char_start").type) == "int64"
    stored = {r["id"]: r for r in table.to_arrow().to_pylist()}
    client = QdrantClient(path=qdrant)
    points, _ = client.scroll("embeddings", limit=10_000, with_payload=True)
    client.close()
    for found in (stored, {p.payload["id"]: p.payload for p in points}):
        assert {rid: (p["parent_id"], p["chunk_index"], p["char_start"], p["char_end"])
                for rid, p in found.items()} == places


@pytest.mark.parametrize("flags, said", [
    (("--chunk_tokens", "7"), "--chunk_tokens 7 is too small; expected 8 to"),
    (("--chunk_tokens", "63"), "--chunk_tokens 63 does not fit the model's --max_seq_length 64 "
                               "with its special tokens; expected 8 to 62"),
    (("--chunk_tokens", "16", "--chunk_overlap", "16"),
     "--chunk_overlap 16 is out of range; expected 0 to 15"),
    (("--chunk_overlap", "62"), "--chunk_overlap 62 is out of range; expected 0 to 61"),
    (("--chunk_tokens", "61", "--prompt", "query: "),
     "--chunk_tokens 61 does not fit the model's --max_seq_length 64 with its special tokens "
     "and the prompt's 2 tokens; expected 8 to 60"),
])
def test_bad_windows_are_refused_before_any_data_is_read(chunked, minilm_export, tmp_path,
                                                         capsys, flags, said):
    corpus = chunked[0]
    out = str(tmp_path / "refused")
    capsys.readouterr()
    code = cli(["run", "--input", corpus, "--model", minilm_export, "--split", "chunks",
                "--max_seq_length", "64", "--output", out, "--progress_every", "0", *flags])
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG, err
    assert said in err
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_a_model_without_a_wordpiece_tokenizer_is_refused(chunked, text_in, tmp_path, capsys):
    out = str(tmp_path / "refused")
    capsys.readouterr()
    code = cli(["run", "--input", chunked[0], "--encoder", text_in[0], "--split", "chunks",
                "--output", out, "--progress_every", "0"])
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG, err
    assert "--split chunks counts tokens with the model's WordPiece preprocessor" in err
    assert "text_in model, which has none it can use; expected a BERT-family preset" in err
    assert not os.path.exists(os.path.join(out, "manifest.json"))


def test_chunk_flags_need_split_chunks(tmp_path, capsys):
    code = cli(["run", "--split", "sentences", "--chunk_tokens", "32",
                "--output", str(tmp_path / "o")])
    assert code == exits.BAD_CONFIG
    assert ("--chunk_tokens applies to --split chunks, got --split sentences"
            in capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "o")


def test_progress_expects_the_windows(chunked, minilm_export):
    from beam_embed.models.spec import encoder_spec
    from beam_embed.pipeline.job.chunking import Chunking
    from beam_embed.pipeline.job.formats import Fields
    from beam_embed.pipeline.job.input_size import expected_records
    from beam_embed.pipeline.job.settings import RunSettings

    corpus, _, manifest = chunked
    settings = RunSettings(input=(corpus,), split="chunks", chunk_tokens=N, chunk_overlap=M)
    plan = Chunking(encoder_spec(minilm_export, max_seq_length=64), N, M)
    files = [(corpus, os.path.getsize(corpus))]
    expected = expected_records(settings, Fields("text", "id", (), 1 << 20), files, plan)
    assert expected == manifest["counts"]["embedded"] > len(DOCS)


TINY_DOC = ("the cats sat on the mat . the dog was playing , a big bank by the river ! "
            "money is small ? the café was big and the dogs run on the river bank") * 2


@pytest.mark.parametrize("model", ["tf1_bert", "tiny_export"])
def test_other_wordpiece_models_and_int8(model, request, tmp_path):
    """A TF1 Hub BERT module (its tokenizer built from its vocabulary) and an export stored as
    int8 (its ranges calibrated on chunks)."""
    from beam_embed.models.spec import encoder_spec

    found = request.getfixturevalue(model)
    handle = ["--encoder", found[0]] if model == "tf1_bert" else ["--model", found]
    dtype = ["--vector_dtype", "int8"] if model == "tiny_export" else []
    corpus = _corpus(tmp_path / "tiny.jsonl", {"doc": TINY_DOC, "one": "a dog"})
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, *handle, "--split", "chunks", "--chunk_tokens",
                       "8", "--chunk_overlap", "2", "--max_seq_length", "16", "--pooling",
                       "mean", "--no-normalize", "--format", "parquet", *dtype)
    rows = _by_doc(parquet_rows(out))
    assert [r["id"] for r in rows["one"]] == ["one#c0"] and len(rows["doc"]) > 6
    spec = encoder_spec(found, max_seq_length=16, poolings=("mean",), normalize=False) \
        if model == "tiny_export" else encoder_spec(encoder=found[0], max_seq_length=16,
                                                    poolings=("mean",), normalize=False)
    embedder = spec.build()
    stored = read_embeddings(out)  # int8 decoded; the chunk columns read with the rest
    places = dict(zip(stored.ids, zip(stored.table.column("parent_id").to_pylist(),
                                      stored.table.column("char_start").to_pylist())))
    vectors = dict(zip(stored.ids, stored.vectors))
    for row in rows["doc"]:
        assert row["text"] == TINY_DOC[row["char_start"]:row["char_end"]]
        assert row["num_tokens"] <= 10 and not row["truncated"]
        assert places[row["id"]] == ("doc", row["char_start"])
        alone = embedder.embed([row["text"]]).vectors["mean"][0]
        if dtype:  # within int8's steps: cosine to the exact vector
            got = vectors[row["id"]]
            assert got @ alone / np.linalg.norm(got) / np.linalg.norm(alone) > 0.999
        else:
            np.testing.assert_allclose(row["mean"], alone, rtol=1e-5, atol=1e-6)
    assert manifest.get("vector_dtype", "float32") == ("int8" if dtype else "float32")


def test_an_xlm_roberta_export_counts_with_sentencepiece(tmp_path):
    """An XLM-R export (SentencePiece in its preprocessor): windows within N pieces as the
    SentencePiece model itself counts them, each the vector of its text alone."""
    import sentencepiece as spm

    from beam_embed.models.spec import encoder_spec
    from tests.xlmr_fixture import TEXTS, write_xlmr

    root = str(tmp_path / "st")
    write_xlmr(root)
    export = str(tmp_path / "export")
    assert cli(["export-model", root, export]) == 0
    sp = spm.SentencePieceProcessor(model_file=os.path.join(root, "sentencepiece.bpe.model"))
    doc = " ".join(t for t in TEXTS if t.strip()) * 2
    corpus = _corpus(tmp_path / "x.jsonl", {"x": doc})
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", export, "--split", "chunks",
                       "--chunk_tokens", "12", "--chunk_overlap", "3", "--format", "parquet")
    column = manifest["poolings"][0]["column"]
    rows = _by_doc(parquet_rows(out))["x"]
    embedder = encoder_spec(export).build()
    covered = np.zeros(len(doc), bool)
    assert len(rows) > 4
    for k, row in enumerate(rows):
        assert row["id"] == f"x#c{k}" and row["text"] == doc[row["char_start"]:row["char_end"]]
        assert len(sp.encode(row["text"])) <= 12, row["text"]
        covered[row["char_start"]:row["char_end"]] = True
        alone = embedder.embed([row["text"]]).vectors[column][0]
        got = np.asarray(row[column], np.float32)
        assert got @ alone / np.linalg.norm(got) / np.linalg.norm(alone) >= 0.99999
    assert "".join(c for c, hit in zip(doc, covered) if not hit).strip() == ""


def test_windows_are_counted_again_where_a_tokenizer_joins_words():
    """A tokenizer that keeps a no-break space inside a word (a character a token, and the
    joined word 10 more): windows made from the words' counts are too long, made again."""
    from beam_embed.pipeline.job.chunking import Chunker, Chunking

    def count(strings):
        return np.array([sum(len(w) + (10 if "\u00a0" in w else 0) for w in s.split(" "))
                         for s in strings], np.int64)

    text = "ab cd\u00a0ef gh ij\u00a0kl mn op qr st uv"
    chunker = Chunker(Chunking(None, 12, 4), count)
    spans = chunker.spans(text)
    assert all(count([text[s:e]])[0] <= 12 for s, e in spans)
    covered = np.zeros(len(text), bool)
    for s, e in spans:
        covered[s:e] = True
    assert all(c in " \u00a0" for c, hit in zip(text, covered) if not hit)
    # without the no-break spaces, the words' counts are the windows'
    plain = text.replace("\u00a0", " ")
    assert [plain[s:e] for s, e in chunker.spans(plain)] == [
        "ab cd ef gh ij kl", "ij kl mn op qr st", "qr st uv"]


def test_a_long_word_is_cut_into_the_longest_parts_that_fit():
    from beam_embed.pipeline.job.chunking import Chunker, Chunking

    def count(strings):  # a token a character, a space none
        return np.array([len(s.replace(" ", "")) for s in strings], np.int64)

    text = "see " + "x" * 50 + " end of it"
    spans = Chunker(Chunking(None, 12, 4), count).spans(text)
    assert [text[s:e] for s, e in spans] == ["see", "x" * 12, "x" * 12, "x" * 12, "x" * 12,
                                             "xx end of it"]


def test_embed_texts_refuses_chunks():
    from beam_embed import EmbedTexts

    with pytest.raises(ValueError, match="split 'chunks' is `beam-embed run --split chunks`'s; "
                                         "expected split 'none' or 'sentences'"):
        EmbedTexts(split="chunks")


def test_windows_overlap_and_reach_the_end():
    assert windows([1] * 10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert windows([1] * 10, 4, 0) == [(0, 4), (4, 8), (8, 10)]
    assert windows([3, 3, 3, 3], 6, 3) == [(0, 2), (1, 3), (2, 4)]
    assert windows([6, 1, 6], 6, 2) == [(0, 1), (1, 2), (2, 3)]  # a word the size of a window
    assert windows([], 6, 2) == []
    # a cut word's parts (2 and 3 after 1) never share a window, nor does an overlap cross them
    assert windows([1, 2, 2, 2, 1, 1], 4, 2, glued={2, 3}) == [(0, 2), (2, 3), (3, 6)]
    assert windows([1, 1, 2, 2, 1, 1], 4, 2, glued={3}) == [(0, 3), (3, 6)]


def test_a_killed_chunk_run_resumes_into_the_clean_runs_rows(tiny_export, tmp_path):
    """--resume keeps the chunk rows the killed run committed and embeds the rest: the same
    rows, places and vectors as a clean run (the windows' sizes left to their defaults)."""
    from beam_embed.pipeline.job.command import main
    from tests.resume_helpers import kill_after, local_commits, manifest

    rng = np.random.default_rng(3)
    words = np.array("the cat sat on a mat dog was big river bank money small".split())
    corpus = _corpus(tmp_path / "docs.jsonl",
                     {f"d{i}": " ".join(rng.choice(words, 120)) for i in range(1600)})
    run = ["--input", corpus, "--model", tiny_export, "--split", "chunks", "--shard_mb", "1",
           "--max_seq_length", "16", "--pooling", "cls", "--progress_every", "0"]
    clean, out = str(tmp_path / "clean"), str(tmp_path / "out")
    run_job(clean, *run)
    kill_after([*run, "--output", out], lambda: local_commits(out), 2)
    assert main([*run, "--output", out, "--resume"]) == exits.OK
    m = manifest(out)
    assert m["resumed"]["records_kept"] > 0
    theirs, ours = parquet_rows(clean), parquet_rows(out)
    assert set(ours) == set(theirs)
    assert sum(m["rows"][n] for n in m["files"]["parquet"]) == len(ours)  # no row twice
    for key in ("read", "embedded", "split_records", "tokens"):  # embedded: the windows
        assert m["counts"][key] == manifest(clean)["counts"][key], key
    for i, row in theirs.items():
        assert (ours[i]["parent_id"], ours[i]["char_start"], ours[i]["char_end"]) == \
            (row["parent_id"], row["char_start"], row["char_end"])
        a, b = np.asarray(row["cls"], np.float32), np.asarray(ours[i]["cls"], np.float32)
        assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.99999
