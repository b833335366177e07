"""A Hugging Face Hub id as the model (`ORG/NAME`): downloaded with huggingface_hub from a hub on
loopback (HF_ENDPOINT) into the model cache, once, and exported as a local folder is; the Hub
presets (bge, e5, gte, multilingual-e5) carry their model cards' pooling, normalisation and
prompts, and without a reachable hub each fails in one line saying what to do."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from beam_embed.models.presets import load_presets
from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.cli import main as cli
from tests.bert_reference import write_checkpoint
from tests.hub_server import COMMIT, serving

pytestmark = pytest.mark.pipeline  # models load and commands run

TEXTS = ["the cat sat on the mat", "a dog", "cat dog cat dog run play"]
ST = "sentence_transformers.models."
REPO = "tiny-org/tiny-st"


def _st_folder(root: str) -> str:
    """A tiny sentence-transformers BERT: Transformer, mean Pooling, Normalize, with prompts;
    and files an export does not read (ONNX), which the download leaves on the hub."""
    write_checkpoint(root)
    modules = [{"idx": 0, "name": "0", "path": "", "type": ST + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST + "Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": ST + "Normalize"}]
    os.makedirs(os.path.join(root, "1_Pooling"))
    os.makedirs(os.path.join(root, "onnx"))
    for path, value in [("modules.json", modules),
                        ("1_Pooling/config.json", {"word_embedding_dimension": 8,
                                                   "pooling_mode_mean_tokens": True}),
                        ("config_sentence_transformers.json",
                         {"prompts": {"query": "cat dog ", "passage": ""}})]:
        with open(os.path.join(root, path), "w", encoding="utf-8") as f:
            json.dump(value, f)
    with open(os.path.join(root, "onnx", "model.onnx"), "wb") as f:
        f.write(b"not read")
    return root


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """A clean model cache and huggingface_hub online (whatever the process imported it with)."""
    monkeypatch.setenv("BEAM_EMBED_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return tmp_path


def _vectors(model: str, **keywords) -> np.ndarray:
    return encoder_spec(model, **keywords).build().embed(TEXTS).vectors["mean"]


def test_a_hub_id_is_downloaded_once_and_embeds_as_its_folder(hub_env, monkeypatch, capsys):
    from beam_embed.models.export.convert import export_checkpoint

    folder = _st_folder(str(hub_env / "tiny-st"))
    export_checkpoint(folder, str(hub_env / "local"))  # the folder exported as a user would
    local = _vectors(str(hub_env / "local"), prompt_name="query")
    with serving({REPO: folder}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        ours = _vectors(REPO, prompt_name="query")
        fetched = sorted(p.rsplit("/resolve/", 1)[1] for p in hub.downloads())
        assert fetched == sorted(f"{COMMIT}/{f}" for f in [
            "1_Pooling/config.json", "config.json", "config_sentence_transformers.json",
            "model.safetensors", "modules.json", "tokenizer_config.json", "vocab.txt"])  # not onnx/
        cos = (ours * local).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(local, axis=1)
        assert cos.min() >= 0.99999
        np.testing.assert_allclose(ours, local, atol=1e-6)
        assert encoder_spec(REPO).hub == f"{REPO}@{COMMIT}"  # the commit, for the manifest
        assert encoder_spec(str(hub_env / "local")).hub is None
        # in the model cache, in the Hub's layout, and exported there
        snapshot = hub_env / "cache" / "hf" / "models--tiny-org--tiny-st" / "snapshots" / COMMIT
        assert (snapshot / "model.safetensors").is_file()
        assert [e for e in os.listdir(hub_env / "cache") if e.startswith("tiny-st-")]
        capsys.readouterr()
        assert cli(["cache"]) == 0  # the downloads are an entry of the cache, cleared with it
        assert re.search(r"  hf +Hugging Face Hub models' downloads\n", capsys.readouterr().out)
        # a second run asks for the revision and downloads nothing
        again = _vectors(REPO, prompt_name="query")
        assert len(hub.downloads()) == len(fetched)
        np.testing.assert_array_equal(again, ours)
    # without the hub, the cached download still serves
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    np.testing.assert_array_equal(_vectors(REPO, prompt_name="query"), ours)
    # `cache clear hf` removes the downloads: then the model is to be had again
    assert cli(["cache", "clear", "hf"]) == 0
    assert not (hub_env / "cache" / "hf").exists()
    capsys.readouterr()
    assert cli(["tokens", "the cat", "--model", REPO]) == 2
    assert "cannot download the Hub model" in capsys.readouterr().err


def test_no_hub_and_no_such_repo_are_one_line(hub_env, monkeypatch, capsys):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert cli(["tokens", "the cat", "--model", REPO]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert (f"cannot download the Hub model {REPO} from http://127.0.0.1:9, and it is neither "
            f"in the cache nor a local folder (relative to {os.getcwd()}): download it") in err
    assert "give `--model FOLDER`, or set HF_ENDPOINT" in err
    with serving({REPO: _st_folder(str(hub_env / "tiny-st"))}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        assert cli(["tokens", "the cat", "--model", "someone/no-such-model"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"{hub.endpoint} has no model someone/no-such-model" in err
        assert cli(["tokens", "the cat", "--model", f"{REPO}@v9"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(f"the Hub model {REPO} has no revision 'v9' at {hub.endpoint}; give "
                            "a branch, tag or commit it has"), err
        assert not hub.downloads()
        assert cli(["tokens", "the cat", "--model", f"{REPO}@{COMMIT}"]) == 0  # a commit
        assert hub.downloads()


def test_export_model_takes_a_hub_id(hub_env, monkeypatch, capsys):
    """`export-model ORG/NAME[@REV] OUT`: downloaded as `run --model` downloads it, exported
    under the Hub name, the same vectors as the folder exported; without a hub, one line."""
    from beam_embed.models.export.convert import export_checkpoint

    folder = _st_folder(str(hub_env / "tiny-st"))
    export_checkpoint(folder, str(hub_env / "local"))
    out = str(hub_env / "from-hub")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert cli(["export-model", REPO, out]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"cannot download the Hub model {REPO}" in err, err
    assert not os.path.exists(out)
    with serving({REPO: folder}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        assert cli(["export-model", f"{REPO}@{COMMIT}", out]) == 0
        assert hub.downloads()
    assert "exported tiny-st (" in capsys.readouterr().out
    with open(os.path.join(out, "beam_embed.json"), encoding="utf-8") as f:
        assert json.load(f)["name"] == "tiny-st"
    np.testing.assert_allclose(_vectors(out, prompt_name="query"),
                               _vectors(str(hub_env / "local"), prompt_name="query"), atol=1e-6)


def test_a_run_records_the_hub_commit(hub_env, monkeypatch, capsys):
    """The manifest's model.hub: ORG/NAME@COMMIT whatever revision was asked for (a branch
    here), so a run says which files of a moving Hub model embedded it."""
    from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest

    corpus = hub_env / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    with serving({REPO: _st_folder(str(hub_env / "tiny-st"))}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        out = str(hub_env / "run")
        assert cli(["run", "--model", f"{REPO}@main", "--input", str(corpus), "--output",
                    out]) == 0
    manifest = JobManifest.read(out)
    assert manifest.model.hub == f"{REPO}@{COMMIT}"
    assert manifest.model.name == "tiny-st" and manifest.counts.embedded == len(TEXTS)


def test_a_local_folder_wins_over_a_hub_id(hub_env, monkeypatch):
    from beam_embed.models.export.convert import export_checkpoint

    folder = _st_folder(str(hub_env / "st"))
    export_checkpoint(folder, str(hub_env / "tiny-org" / "tiny-st"))
    monkeypatch.chdir(hub_env)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # would fail if it were asked
    np.testing.assert_array_equal(_vectors(REPO), _vectors(str(hub_env / "tiny-org" / "tiny-st")))
    assert not (hub_env / "cache" / "hf").exists()


CARDS = {  # the model cards' recipes
    "bge-small-en-v1.5": ("BAAI/bge-small-en-v1.5", ["cls"],
                          {"query": "Represent this sentence for searching relevant passages: "},
                          None),
    "e5-small-v2": ("intfloat/e5-small-v2", ["mean"],
                    {"query": "query: ", "passage": "passage: "}, "passage"),
    "gte-small": ("thenlper/gte-small", ["mean"], None, None),
    "multilingual-e5-small": ("intfloat/multilingual-e5-small", ["mean"],
                              {"query": "query: ", "passage": "passage: "}, "passage"),
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_hub_presets_carry_their_recipe_and_fail_offline_in_one_line(name, hub_env, monkeypatch,
                                                                      capsys):
    repo, pooling, prompts, default = CARDS[name]
    preset = load_presets()[name]
    assert (preset["checkpoint"], preset["pooling"], preset["normalize"]) == (repo, pooling, True)
    assert preset.get("prompts") == prompts and preset.get("default_prompt_name") == default
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no network in the tests
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert cli(["tokens", "the cat", "--model", name]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err, err
    assert (f"cannot download the Hub model {repo} from https://huggingface.co (HF_HUB_OFFLINE "
            "is set), and it is neither in the cache nor a local folder") in err
    assert "give `--model FOLDER`" in err


def test_a_hub_preset_downloads_and_its_card_prompts_apply(hub_env, monkeypatch):
    """A preset naming a Hub id is downloaded on first use; its `prompts` replace those the
    folder records, for the run (its default prompt) and for search's queries."""
    from beam_embed.models.export.convert import export_checkpoint
    from beam_embed.pipeline.search.corpus import query_prompt

    folder = _st_folder(str(hub_env / "tiny-st"))
    export_checkpoint(folder, str(hub_env / "local"))
    presets = hub_env / "models.yaml"
    presets.write_text(f"tiny:\n  kind: bert\n  name: tiny-card\n  checkpoint: {REPO}\n"
                       "  pooling: [mean]\n  normalize: true\n  prompts:\n"
                       "    query: 'a dog '\n    passage: 'the river '\n"
                       "  default_prompt_name: passage\n")
    monkeypatch.setenv("BEAM_EMBED_PRESETS", str(presets))
    with serving({REPO: folder}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        spec = encoder_spec("tiny")
        assert (spec.prompt, spec.prompt_name) == ("the river ", "passage")
        np.testing.assert_allclose(spec.build().embed(TEXTS).vectors["mean"],
                                   _vectors(str(hub_env / "local"), prompt="the river "),
                                   atol=1e-6)
        assert encoder_spec("tiny", prompt_name="query").prompt == "a dog "
        # the preset's repo by its id: the same card prompts
        assert (encoder_spec(REPO).prompt, encoder_spec(REPO).prompt_name) == ("the river ",
                                                                              "passage")
        assert hub.downloads()
    export = [e for e in os.listdir(hub_env / "cache") if e.startswith("tiny-card-")]
    encoder = str(hub_env / "cache" / export[0] / "encoder")
    assert query_prompt("tiny-card", encoder) == (
        {"prompt": "a dog "}, "queries embedded with the model's prompt 'query' ('a dog ')")
    # the folder's own prompts, for a model no preset gives them for
    assert query_prompt("tiny-st", encoder)[0] == {"prompt_name": "query"}


def test_without_huggingface_hub_the_line_names_the_extra(hub_env, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    assert cli(["tokens", "the cat", "--model", REPO]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and (f"{REPO} is a Hugging Face Hub id, and downloading it needs the "
                                "`hub` extra (huggingface_hub): ") in err, err
    assert "[hub]" in err and "give `--model FOLDER`" in err
