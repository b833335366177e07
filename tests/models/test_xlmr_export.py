"""XLM-RoBERTa through `export-model` and a run: a random tiny model with a SentencePiece model
trained in the test (tests/xlmr_fixture.py), checked against references computed without the
exporter: the sentencepiece library's ids with fairseq's offset written out here, keras-hub's
XLMRobertaTokenizer, and keras-hub's XLMRobertaBackbone loading the same Hugging Face folder
(its own converter: position rows and token type folded its way), pooled here in numpy."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.checkpoint_layout import inspect_checkpoint
from beam_embed.models.export.convert import export_checkpoint
from beam_embed.models.spec import encoder_spec
from tests.job_helpers import parquet_rows, run_job, write_lines
from tests.xlmr_fixture import MAX_POSITIONS, TEXTS, write_tokenizer_json, write_xlmr


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory) -> tuple[str, str]:
    """(the sentence-transformers folder, its export)."""
    root = str(tmp_path_factory.mktemp("xlmr") / "st")
    write_xlmr(root)
    export = os.path.join(os.path.dirname(root), "export")
    from beam_embed.pipeline.cli import main as cli

    assert cli(["export-model", root, export]) == 0  # the command, as a user runs it
    return root, export


def _fairseq_ids(folder: str, texts: list[str]) -> list[list[int]]:
    """XLM-R's ids as fairseq defines them: SentencePiece's id + 1, its <unk> (0) -> 3."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "sentencepiece.bpe.model"))
    return [[i + 1 if i else 3 for i in sp.encode(t)] for t in texts]


def _keras_hub_vectors(folder: str, ids: list[list[int]]) -> np.ndarray:
    """Mean over <s> ... </s> of keras-hub's backbone, each text alone, L2-normalised."""
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras_hub

    backbone = keras_hub.models.XLMRobertaBackbone.from_preset(folder, dtype="float32")
    out = []
    for row in ids:
        x = np.array([[0, *row, 2]], np.int32)
        tokens = np.asarray(backbone({"token_ids": x, "padding_mask": np.ones_like(x)}))[0]
        mean = tokens.astype(np.float64).mean(axis=0)
        out.append(mean / np.linalg.norm(mean))
    return np.stack(out)


def test_the_exported_tokenizer_gives_xlmr_ids(xlmr):
    import keras_hub
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece op the SavedModel uses)

    root, export = xlmr
    meta = json.load(open(os.path.join(export, "beam_embed.json")))
    assert (meta["architecture"], meta["tokenizer"]) == ("xlm-roberta", "sentencepiece")
    assert meta["max_position_embeddings"] == MAX_POSITIONS - 2
    assert (meta["pooling"], meta["normalize"], meta["unused_variables"]) == ("mean", True, [])
    pre = tf.saved_model.load(os.path.join(export, "preprocessor"))
    ours = [row.flat_values.numpy().tolist() for row in pre.tokenize(tf.constant(TEXTS))]
    assert ours == _fairseq_ids(root, TEXTS)
    reference = keras_hub.models.XLMRobertaTokenizer(
        proto=os.path.join(root, "sentencepiece.bpe.model"))
    assert ours == [np.asarray(reference(t)).tolist() for t in TEXTS]
    assert any(3 in row for row in ours)  # emoji never trained on: <unk>, fairseq's 3
    # XLM-R's packing: <s> A </s></s> B </s>, <pad> after, no token types
    a, b = pre.tokenize(tf.constant(["Привет", "東京"])), pre.tokenize(tf.constant(["mir", "!"]))
    packed = pre.bert_pack_inputs([a, b], tf.constant(24))
    for i, (x, y) in enumerate(zip(_fairseq_ids(root, ["Привет", "東京"]),
                                   _fairseq_ids(root, ["mir", "!"]))):
        row = [0, *x, 2, 2, *y, 2]
        assert packed["input_word_ids"].numpy()[i].tolist() == row + [1] * (24 - len(row))
        assert packed["input_mask"].numpy()[i].tolist() == [1] * len(row) + [0] * (24 - len(row))
    assert not packed["input_type_ids"].numpy().any()


def test_words_and_their_spans(xlmr):
    _, export = xlmr
    encoder = encoder_spec(export).build().encoder
    texts = ["  spaced \u00a0 out\ttext\u3000東京  ", "Привет, мир! 🦄"]
    words = encoder.tokenize_with_offsets(texts)
    vocab = encoder.vocabulary()
    for i, want in enumerate([["spaced", "out", "text", "東京"], ["Привет,", "мир!", "🦄"]]):
        begin, end = words.spans(i)
        raw = texts[i].encode()
        assert [raw[s:e].decode() for s, e in zip(begin, end)] == want
    pieces = [vocab[p] for p in words.units.rows()[1]]
    assert pieces[0] == "▁" and pieces[-1] == "<unk>"


def _sp_words(folder: str, text: str) -> list[list[str]]:
    """SentencePiece's own pieces of `text`, a word starting at each piece that starts with ▁."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "sentencepiece.bpe.model"))
    words = []
    for piece in sp.encode(text, out_type=str):
        piece = piece if sp.piece_to_id(piece) else "<unk>"
        if piece.startswith("▁") or not words:
            words.append([])
        words[-1].append(piece)
    return words


def test_tokens_shows_the_pieces(xlmr, capsys):
    from beam_embed.pipeline.cli import main as cli

    root, export = xlmr
    text = "Привет, мир! rocket 🦄 crème"
    assert cli(["tokens", text, "--model", export, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["texts"][0]
    assert report["words"][export] == _sp_words(root, text)
    assert report["stats"][export]["unknown"] == 1


def test_token_vectors_per_piece_match_keras_hub(xlmr):
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras_hub

    root, export = xlmr
    text = "crème brûlée à Paris 🦄"
    out = encoder_spec(export, granularity="token", token_unit="wordpiece").build().embed([text])
    pieces = [p for word in _sp_words(root, text) for p in word]
    assert out.tokens[0] == pieces
    # each piece's characters ("▁" alone: none); a word with an <unk> gives each piece its span
    words = _sp_words(root, text)
    assert words[-1] == ["▁", "<unk>"]
    spans = [text[s:e] for s, e in zip(out.starts[0], out.ends[0])]
    assert spans == [p.removeprefix("▁") for w in words[:-1] for p in w] + ["🦄", "🦄"]
    backbone = keras_hub.models.XLMRobertaBackbone.from_preset(root, dtype="float32")
    ids = np.array([[0, *_fairseq_ids(root, [text])[0], 2]], np.int32)
    want = np.asarray(backbone({"token_ids": ids, "padding_mask": np.ones_like(ids)}))[0, 1:-1]
    np.testing.assert_allclose(out.vectors[0], want, atol=2e-5)


def test_vectors_match_keras_hub_xlmr(xlmr):
    root, export = xlmr
    spec = encoder_spec(export)
    ours = spec.build().embed(TEXTS).vectors[spec.parsed_poolings()[0].column]
    want = _keras_hub_vectors(root, _fairseq_ids(root, TEXTS))
    assert ours.shape == want.shape == (len(TEXTS), 16)
    cosines = (ours * want).sum(1) / np.linalg.norm(ours, axis=1)
    assert cosines.min() >= 0.99999
    np.testing.assert_allclose(ours, want, atol=2e-6)  # measured: 2.4e-7


@pytest.mark.pipeline
def test_run_with_the_exported_xlmr(xlmr, tmp_path):
    root, export = xlmr
    texts = [t for t in TEXTS if t.strip()]
    corpus = write_lines(str(tmp_path / "corpus.txt"), texts)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--model", export)
    column = manifest["poolings"][0]["column"]
    rows = parquet_rows(out)
    got = np.stack([rows[f"{corpus}:{i + 1}"][column] for i in range(len(texts))])
    want = _keras_hub_vectors(root, _fairseq_ids(root, texts))
    assert ((got * want).sum(1)).min() >= 0.99999
    lengths = [rows[f"{corpus}:{i + 1}"]["num_tokens"] for i in range(len(texts))]
    assert lengths == [len(r) + 2 for r in _fairseq_ids(root, texts)]


def test_a_folder_with_only_tokenizer_json(xlmr, tmp_path):
    """Its Unigram model is rebuilt into the SentencePiece model: the ids of the `tokenizers`
    library (as transformers' fast tokenizer computes them), the vectors of the model file's
    export."""
    import tensorflow as tf
    import tokenizers

    root = str(tmp_path / "st")
    write_xlmr(root)  # the same weights and SentencePiece model as the fixture's
    write_tokenizer_json(root)
    os.remove(os.path.join(root, "sentencepiece.bpe.model"))
    export = str(tmp_path / "export")
    meta = export_checkpoint(root, export)
    assert meta["vocabulary_from"] == "tokenizer.json"
    fast = tokenizers.Tokenizer.from_file(os.path.join(root, "tokenizer.json"))
    pre = tf.saved_model.load(os.path.join(export, "preprocessor"))
    ours = [row.flat_values.numpy().tolist() for row in pre.tokenize(tf.constant(TEXTS))]
    want = [fast.encode(t, add_special_tokens=False).ids for t in TEXTS]
    # SentencePiece drops trailing whitespace; the fast tokenizer keeps a lone "▁" for it
    lone = fast.token_to_id("▁")
    want = [w[:-1] if t != t.rstrip() and w[-1:] == [lone] else w for t, w in zip(TEXTS, want)]
    assert ours == want
    spec = encoder_spec(export)
    vectors = spec.build().embed(TEXTS).vectors[spec.parsed_poolings()[0].column]
    reference = encoder_spec(xlmr[1])
    same = reference.build().embed(TEXTS).vectors[reference.parsed_poolings()[0].column]
    np.testing.assert_allclose(vectors, same, atol=1e-6)


@pytest.mark.parametrize("edit, message", [
    (lambda j: j["model"].update(type="BPE"), r"its model is 'BPE' \(expected Unigram\)"),
    (lambda j: j.update(normalizer={"type": "NFKC"}), r"its normalizer is \['NFKC'\]"),
    (lambda j: j.update(pre_tokenizer={"type": "Whitespace"}), r"its pre_tokenizer is"),
    (lambda j: j["model"]["vocab"].pop(), r"ends \['[^<]"),
])
def test_a_tokenizer_json_it_cannot_rebuild_is_refused_by_name(tmp_path, edit, message):
    root = str(tmp_path / "st")
    write_xlmr(root)
    write_tokenizer_json(root)
    os.remove(os.path.join(root, "sentencepiece.bpe.model"))
    path = os.path.join(root, "tokenizer.json")
    with open(path) as f:
        found = json.load(f)
    edit(found)
    with open(path, "w") as f:
        json.dump(found, f)
    with pytest.raises(CheckpointError, match=message) as e:
        inspect_checkpoint(root)
    assert "put the model's sentencepiece.bpe.model beside config.json" in str(e.value)


def test_a_sentencepiece_model_of_other_weights_is_refused(tmp_path):
    root = str(tmp_path / "st")
    write_xlmr(root)
    config_file = os.path.join(root, "config.json")
    with open(config_file) as f:
        config = json.load(f)
    pieces = config["vocab_size"]
    with open(config_file, "w") as f:
        json.dump({**config, "vocab_size": pieces + 5}, f)
    with pytest.raises(CheckpointError, match=fr"gives {pieces} XLM-R ids .* vocab_size is "
                                              fr"{pieces + 5}"):
        inspect_checkpoint(root)
    with open(os.path.join(root, "sentencepiece.bpe.model"), "wb") as f:
        f.write(b"\xff\xff\xff not a model")
    with pytest.raises(CheckpointError, match=r"is not a SentencePiece model"):
        inspect_checkpoint(root)


def test_lower_casing_is_refused_for_sentencepiece(tmp_path):
    root = str(tmp_path / "st")
    write_xlmr(root)
    with pytest.raises(CheckpointError, match=r"--lower-case/--no-lower-case is for WordPiece"):
        inspect_checkpoint(root, lower_case=True)
