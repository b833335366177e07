"""Prompts on a real model: the installed MiniLM with a config_sentence_transformers.json holding
prompts and a default one. A run's vectors against a float64 numpy pass of MiniLM's weights on
the prefixed texts, tokenized by the `tokenizers` library (independent of the export); the
prompt recorded in the manifest, refused when unknown or given twice (exit 2, nothing read),
compared by --reuse; `search` embeds queries with the model's query prompt and says so."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from beam_embed.pipeline.cli import main as cli
from beam_embed.process import exits
from tests.bert_reference import forward
from tests.job_helpers import parquet_rows, run_job, write_lines

pytestmark = pytest.mark.pipeline  # whole runs and the commands that read them

TEXTS = ["A man is eating food.", "The river bank flooded after the storm.",
         "Quarterly revenue grew by 12 percent.", "café crème"]
PROMPTS = {"query": "query: ", "passage": "passage: ", "document": ""}


@pytest.fixture(scope="module")
def prompted(minilm_checkpoint, tmp_path_factory):
    """(export of MiniLM with prompts, default "passage"; corpus; the default run's folder)."""
    from beam_embed.models.export.convert import export_checkpoint

    base = tmp_path_factory.mktemp("prompts")
    root = str(base / "minilm-prompts")
    shutil.copytree(minilm_checkpoint, root)
    with open(os.path.join(root, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": PROMPTS, "default_prompt_name": "passage"}, f)
    export = str(base / "export")
    export_checkpoint(root, export, name="minilm-prompts")
    corpus = write_lines(str(base / "c.txt"), TEXTS)
    default = str(base / "default")
    run_job(default, "--input", corpus, "--model", export, "--format", "parquet")
    return export, corpus, default, root


def reference(root: str, texts: list[str]) -> np.ndarray:
    """MiniLM's normalized mean pooling of `texts`, in float64 numpy from its weights."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    weights = load_file(os.path.join(root, "model.safetensors"))
    tokenizer = Tokenizer.from_file(os.path.join(root, "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    out = []
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids])
        mask = np.ones_like(ids, np.float64)
        x = forward(weights, ids, mask, np.zeros_like(ids), layers=6, heads=12)[0][-1][0]
        v = x.mean(0)
        out.append(v / np.linalg.norm(v))
    return np.array(out)


def _vectors(output: str) -> np.ndarray:
    rows = {r["text"]: r["mean"] for r in parquet_rows(output).values()}
    return np.array([rows[t] for t in TEXTS], np.float64)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_the_default_prompt_applies_and_is_recorded(prompted):
    export, _, default, root = prompted
    with open(os.path.join(default, "manifest.json")) as f:
        model = json.load(f)["model"]
    assert (model["prompt"], model["prompt_name"]) == ("passage: ", "passage")
    expected = reference(root, ["passage: " + t for t in TEXTS])
    assert _cosines(_vectors(default), expected).min() >= 0.99999
    plain = reference(root, TEXTS)
    assert _cosines(_vectors(default), plain).max() < 0.999  # the prompt changed every vector


def test_a_named_prompt_and_a_literal_one(prompted, tmp_path, capsys):
    export, corpus, _, root = prompted
    query = str(tmp_path / "query")
    capsys.readouterr()
    manifest = run_job(query, "--input", corpus, "--model", export, "--format", "parquet",
                       "--prompt_name", "query")
    assert "(poolings mean; the model's prompt 'query' ('query: '))" in capsys.readouterr().err
    assert (manifest["model"]["prompt"], manifest["model"]["prompt_name"]) == ("query: ", "query")
    expected = reference(root, ["query: " + t for t in TEXTS])
    assert _cosines(_vectors(query), expected).min() >= 0.99999
    bare = str(tmp_path / "bare")
    manifest = run_job(bare, "--input", corpus, "--model", export, "--format", "parquet",
                       "--prompt", "")
    assert "prompt" not in manifest["model"] and "prompt_name" not in manifest["model"]
    assert _cosines(_vectors(bare), reference(root, TEXTS)).min() >= 0.99999


@pytest.mark.parametrize("flags, said", [
    (("--prompt_name", "queries"), "unknown --prompt_name 'queries': minilm-prompts has the "
                                   "prompts ['query', 'passage', 'document']; expected one of "
                                   "['query', 'passage', 'document']"),
    (("--prompt_name", "query", "--prompt", "q: "), "--prompt and --prompt_name were both given"),
    (("--long-text", "chunk"), "--long-text chunk does not take a prompt (minilm-prompts's "
                               "default prompt 'passage: ')"),
])
def test_refusals_exit_2_before_any_data_is_read(prompted, tmp_path, capsys, flags, said):
    export, corpus, _, _ = prompted
    out = str(tmp_path / "out")
    capsys.readouterr()
    code = cli(["run", "--input", corpus, "--model", export,
                "--output", out, "--progress_every", "0", *flags])
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG, err
    assert said in err
    assert not os.path.exists(out)


def test_reuse_copies_only_from_a_run_with_the_same_prompt(prompted, tmp_path, capsys):
    export, corpus, default, _ = prompted
    same = str(tmp_path / "same")
    manifest = run_job(same, "--input", corpus, "--model", export, "--format", "parquet",
                       "--reuse", default)
    assert manifest["counts"]["reused"] == len(TEXTS)
    capsys.readouterr()
    code = cli(["run", "--input", corpus, "--model", export, "--output", str(tmp_path / "q"),
                "--progress_every", "0", "--prompt_name", "query", "--reuse", default])
    err = capsys.readouterr().err
    assert code == exits.BAD_CONFIG, err
    assert "prompt 'passage: ', this run's 'query: '" in err
    assert not os.path.exists(tmp_path / "q" / "manifest.json")


def test_search_embeds_queries_with_the_query_prompt(prompted, capsys):
    export, _, default, root = prompted
    capsys.readouterr()
    assert cli(["search", default, "A man is eating food.", "--json", "-k", "1"]) == exits.OK
    said = capsys.readouterr()
    assert "queries embedded with the model's prompt 'query' ('query: ')" in said.err
    hit = json.loads(said.out)[0]["hits"][0]
    assert hit["text"] == "A man is eating food."
    query = reference(root, ["query: A man is eating food."])[0]
    stored = reference(root, ["passage: A man is eating food."])[0]
    assert hit["score"] == pytest.approx(float(query @ stored), abs=1e-5)


def test_search_says_when_the_model_has_no_query_prompt(tiny_export, tmp_path, capsys):
    corpus = write_lines(str(tmp_path / "c.txt"), ["the cat sat", "a dog"])
    out = str(tmp_path / "tiny")
    run_job(out, "--input", corpus, "--model", tiny_export, "--format", "parquet")
    capsys.readouterr()
    assert cli(["search", out, "a dog", "-k", "1"]) == exits.OK
    assert ("queries embedded without a prompt (tiny-bert has no prompt named 'query')"
            in capsys.readouterr().err)


def test_the_api_takes_the_same_keywords(prompted):
    from beam_embed import load_encoder

    export, _, _, root = prompted
    vectors = load_encoder(export, prompt_name="query").encode(TEXTS)
    expected = reference(root, ["query: " + t for t in TEXTS])
    assert _cosines(vectors.astype(np.float64), expected).min() >= 0.99999
    literal = load_encoder(export, prompt="query: ").encode(TEXTS)
    np.testing.assert_allclose(literal, vectors, atol=1e-6)
    from beam_embed import EmbeddingModelHandler, EmbedTexts, TextEmbeddings

    for made in (EmbedTexts(export, prompt_name="query"), EmbeddingModelHandler(
            export, prompt_name="query"), TextEmbeddings(["t"], export, prompt_name="query")):
        spec = made.handler.spec if isinstance(made, TextEmbeddings) else made.spec
        assert (spec.prompt, spec.prompt_name) == ("query: ", "query")
    assert EmbedTexts(export).spec.prompt == "passage: "  # the model's default
    with pytest.raises(ValueError, match="--prompt and --prompt_name were both given"):
        load_encoder(export, prompt="q: ", prompt_name="query")
    with pytest.raises(ValueError, match="unknown --prompt_name 'nope'"):
        load_encoder(export, prompt_name="nope")
