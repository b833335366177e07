"""TF1 Hub BERT modules: recognized alone, tokenized as the module's own (google-research)
tokenizer, every pooling and token vector equal to the numpy BERT (google-research's tanh GELU)
run on the reference tokenizer's ids."""

from __future__ import annotations

import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tokenizers

from beam_embed.models.encoders.detect import detect
from beam_embed.models.spec import encoder_spec
from tests.bert_reference import TINY_VOCAB, forward, poolings_of_ids, write_checkpoint
from tests.job_helpers import parquet_rows, run_job, tfrecord_rows, write_lines
from tests.models.test_google_tokenization import google_reference
from tests.models.test_tokenization import HARD
from tests.tf1_bert_fixture import GELU, build_tf1_bert

POOLINGS = ("cls", "pooled_output", "mean")
# A cased vocabulary with accents: "Café" and "café", "É" and "é" are different pieces.
CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "the", "Café", "café",
               "naïve", "Über", "über", "É", "é", "##COLE", "##cole", "résumé", "Ångström",
               "is", "a", "big", "small", ".", ",", "!", "##s", "cat", "Cat", "x"]
CASED_TEXTS = ["The Café is big.", "ÉCOLE naïve résumé", "Über Ångström cats!", "the café",
               "The café is a big Cat. " * 5]  # 35 pieces: more than the 16 positions hold


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def hf_ids(vocab_file: str, lower_case: bool, texts: list[str]) -> list[list[int]]:
    ref = tokenizers.BertWordPieceTokenizer(vocab_file, lowercase=lower_case,
                                            strip_accents=lower_case)
    return [ref.encode(t, add_special_tokens=False).ids for t in texts]


def vocab_file(folder, vocab: list[str]) -> str:
    path = os.path.join(str(folder), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    return path


@pytest.fixture(scope="module")
def cased_tf1(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tf1_cased")
    weights = write_checkpoint(str(folder / "ckpt"), vocab=CASED_VOCAB, max_positions=16, seed=2)
    build_tf1_bert(str(folder / "module"), weights, CASED_VOCAB, lower_case=False)
    return str(folder / "module"), weights, vocab_file(folder, CASED_VOCAB)


def test_recognized_alone_with_its_positions_as_max_length(tf1_bert):
    module, _ = tf1_bert
    assert detect(module) == ("bert_tf1", {"max_seq_length": 16})
    spec = encoder_spec(encoder=module)
    assert (spec.kind, spec.max_seq_length, spec.poolings, spec.preprocessor) == \
        ("bert_tf1", 16, ("cls",), None)
    # the module's tokenization_info names the build folder's vocab, which is gone: the
    # vocabulary is found inside the module folder
    info = tf.saved_model.load(module, tags=[]).signatures["tokenization_info"]()
    assert not os.path.exists(info["vocab_file"].numpy().decode())


def test_every_pooling_matches_numpy_with_truncation(tf1_bert, tmp_path):
    module, weights = tf1_bert
    texts = ["the cat sat on the mat .", "a dog", "x", "the big river bank was money " * 4]
    embedder = encoder_spec(encoder=module, poolings=POOLINGS).build()
    got = embedder.embed(texts)
    ids = hf_ids(vocab_file(tmp_path, TINY_VOCAB), True, texts)
    want, lengths = poolings_of_ids(weights, ids, max_len=16, hidden_act=GELU)
    for pooling in POOLINGS:
        assert cosines(got.vectors[pooling], want[pooling]).min() >= 0.99999, pooling
        np.testing.assert_allclose(got.vectors[pooling], want[pooling], atol=1e-4)
    assert got.num_tokens.tolist() == [len(r) + 2 for r in ids]
    assert got.truncated.tolist() == [False, False, False, True] and lengths[-1] == 16


def _flavors_differ(text: str) -> bool:
    """Where google-research's tokenizer and Hugging Face's are documented to differ
    (models/bert_preprocessor.py): Σ (final-sigma lower-casing), private-use or unassigned
    characters (kept in words), words of 101-200 characters (pieces, not [UNK])."""
    return ("Σ" in text or any(unicodedata.category(c) in ("Co", "Cn") for c in text)
            or any(100 < len(w) <= 200 for w in text.split()))


@pytest.mark.parametrize("lower_case", [True, False])
def test_tokenization_is_the_modules_own(minilm_checkpoint, tmp_path, lower_case):
    """The module's vocabulary and do_lower_case, tokenized as google-research's tokenization.py
    does, which equals the `tokenizers` library's BERT tokenizer except where documented."""
    vocab = os.path.join(minilm_checkpoint, "vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        words = f.read().splitlines()
    weights = write_checkpoint(str(tmp_path / "ckpt"), vocab=words, width=4, heads=1,
                               intermediate=4, layers=1)
    build_tf1_bert(str(tmp_path / "module"), weights, words, lower_case, layers=1, heads=1)
    encoder = encoder_spec(encoder=str(tmp_path / "module")).build().encoder
    texts = HARD + ["SciBERT Cased Text: BRCA1 and TP53", "ÉCOLE Über", "ΣΑΣ σας",
                    "a" * 150 + " b"]
    got = [row.tolist() for row in encoder.tokenize(texts).rows()]
    google = google_reference(vocab, lower_case)
    hf = hf_ids(vocab, lower_case, texts)
    for text, ours, want in zip(texts, got, hf):
        assert ours == google(text), text[:60]
        assert ours == want or _flavors_differ(text), text[:60]
    assert sum(ours != want for ours, want in zip(got, hf)) >= 2  # the flavor is not HF's


@pytest.mark.parametrize("flags, message", [
    ({"poolings": ("mean@-2",)},
     "pooling 'mean@-2' asks for layer -2, but bert_tf1 encoders expose 1 layer(s) (a TF1 Hub "
     "BERT module outputs only its last layer, sequence_output)"),
    ({"precision": "bf16"},
     "--precision bf16 is not available for bert_tf1 encoders (a TF1 Hub module runs its own "
     "graph, in fp32); expected one of ['fp32']"),
    ({"poolings": ("max",)}, "unknown pooling 'max'; expected one of ['cls', 'mean', "
                             "'pooled_output']"),
    ({"granularity": "token", "token_layer": "-2"},
     "token layer -2 is outside the model's 1 layers (valid: -1..0) (a TF1 Hub BERT module"),
])
def test_what_the_module_lacks_fails_before_it_loads(flags, message):
    with pytest.raises(ValueError) as e:
        encoder_spec(encoder="/no/such/module", kind="bert_tf1", **flags)
    assert message in str(e.value)


def test_max_length_beyond_the_positions_fails_on_load(tf1_bert):
    with pytest.raises(ValueError, match="--max-seq-length 32 is longer than the 16 positions"):
        encoder_spec(encoder=tf1_bert[0], max_seq_length=32).build()


def test_token_vectors_are_the_numpy_layer(tf1_bert, tmp_path):
    module, weights = tf1_bert
    text = "the cats sat on the mat ."
    tokens = encoder_spec(encoder=module, granularity="token", token_unit="wordpiece").build()
    got = tokens.embed([text])
    (ids,) = hf_ids(vocab_file(tmp_path, TINY_VOCAB), True, [text])
    row = np.array([[2, *ids, 3]])
    layers, _ = forward(weights, row, np.ones(row.shape), np.zeros_like(row), 2, 2, GELU)
    assert got.tokens[0] == [TINY_VOCAB[i] for i in ids]
    assert cosines(got.vectors[0], layers[-1][0, 1:-1]).min() >= 0.99999
    spans = list(zip(got.starts[0].tolist(), got.ends[0].tolist()))
    assert [text[s:e] for s, e in spans] == ["the", "cat", "s", "sat", "on", "the", "mat", "."]


@pytest.mark.pipeline
def test_cased_module_through_the_job(cased_tf1, tmp_path):
    """`beam-embed run --encoder MODULE`: every vector equals the numpy BERT on the ids of
    Hugging Face's cased tokenizer; the text longer than the positions is truncated and
    flagged."""
    module, weights, vocab = cased_tf1
    corpus = write_lines(str(tmp_path / "c.txt"), CASED_TEXTS)
    out = str(tmp_path / "out")
    manifest = run_job(out, "--input", corpus, "--encoder", module,
                       "--pooling", ",".join(POOLINGS))
    assert (manifest["model"]["kind"], manifest["model"]["max_seq_length"]) == ("bert_tf1", 16)
    assert manifest["counts"]["truncated"] == 1
    ids = hf_ids(vocab, False, CASED_TEXTS)
    assert ids[0][:2] == [5, 7] and 1 not in ids[0]  # "The", "Café": case and accents kept
    want, _ = poolings_of_ids(weights, ids, max_len=16, hidden_act=GELU)
    rows, examples = parquet_rows(out), tfrecord_rows(out)
    for i in range(len(CASED_TEXTS)):
        row = rows[f"{corpus}:{i + 1}"]
        assert row["num_tokens"] == len(ids[i]) + 2
        assert row["truncated"] == (len(ids[i]) + 2 > 16)
        for pooling in POOLINGS:
            assert cosines(row[pooling], want[pooling][i]) >= 0.99999, (i, pooling)
            assert cosines(examples[row["id"]][pooling], want[pooling][i]) >= 0.99999


@pytest.mark.pipeline
def test_similarity_and_tokens_commands(tf1_bert, tmp_path, capsys):
    import json

    from beam_embed.pipeline.cli import main as cli

    module, weights = tf1_bert
    sentence = "the cat sat on the mat ."
    assert cli(["similarity", sentence, "--words", "cat", "mat", "--model", module,
                "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["module"]
    (ids,) = hf_ids(vocab_file(tmp_path, TINY_VOCAB), True, [sentence])
    row = np.array([[2, *ids, 3]])
    layers, _ = forward(weights, row, np.ones(row.shape), np.zeros_like(row), 2, 2, GELU)
    cat, mat = layers[-1][0, 2], layers[-1][0, 6]  # [CLS] the cat sat on the mat .
    assert report["words"] == ["cat", "mat"]
    assert report["similarity"][0][1] == pytest.approx(cosines(cat, mat), abs=1e-5)

    assert cli(["tokens", "the cats sat", "--model", module, "--json"]) == 0
    words = json.loads(capsys.readouterr().out)["texts"][0]["words"][module]
    assert words == [["the"], ["cat", "##s"], ["sat"]]
