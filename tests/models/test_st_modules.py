"""A sentence-transformers folder's module stack, in modules.json order from the paths it names:
Transformer (here in a sub-folder), Pooling in each mode it writes, Dense (weights, activation),
Normalize. The run's vectors are checked against a float64 numpy pass over the saved weights
(tests/bert_reference.py) with the modules applied by hand; a module that cannot be reproduced
is refused by name."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.convert import export_checkpoint
from beam_embed.models.export.st_modules import POOLING_MODES
from beam_embed.models.spec import encoder_spec
from tests.bert_reference import TINY_VOCAB, forward, write_checkpoint

TEXTS = ["the cat sat on the mat", "a dog", "the river bank is big , money was small",
         "cat dog cat dog cat dog run play"]
MODES = {v: k for k, v in POOLING_MODES.items()}
ST = "sentence_transformers.models."


def _write_json(path: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


def st_folder(root: str, pooling: str, dense: list[tuple[int, int, str]] = (),
              normalize: bool = True, seed: int = 0) -> tuple[dict, list]:
    """A tiny sentence-transformers model: the BERT in 0_Transformer/, then Pooling, each Dense
    (in, out, torch activation), Normalize. Returns the BERT's weights and the Dense layers'
    (weight, bias, activation name)."""
    weights = write_checkpoint(os.path.join(root, "0_Transformer"), seed=seed)
    modules = [{"idx": 0, "name": "0", "path": "0_Transformer", "type": ST + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pool", "type": ST + "Pooling"}]
    _write_json(os.path.join(root, "1_Pool", "config.json"),
                {"word_embedding_dimension": 8, **{k: k == MODES[pooling] for k in MODES.values()},
                 "include_prompt": True})
    rng = np.random.default_rng(seed + 1)
    layers = []
    for i, (n_in, n_out, activation) in enumerate(dense, start=2):
        path = f"{i}_Dense"
        w = (rng.standard_normal((n_out, n_in)) * 0.5).astype(np.float32)
        b = (rng.standard_normal(n_out) * 0.1).astype(np.float32)
        os.makedirs(os.path.join(root, path))
        save_file({"linear.weight": w, "linear.bias": b},
                  os.path.join(root, path, "model.safetensors"))
        _write_json(os.path.join(root, path, "config.json"),
                    {"in_features": n_in, "out_features": n_out, "bias": True,
                     "activation_function": f"torch.nn.modules.{activation}"})
        modules.append({"idx": i, "name": str(i), "path": path, "type": ST + "Dense"})
        layers.append((w, b, activation.rsplit(".", 1)[-1]))
    if normalize:
        modules.append({"idx": len(modules), "name": str(len(modules)),
                        "path": f"{len(modules)}_Normalize", "type": ST + "Normalize"})
    _write_json(os.path.join(root, "modules.json"), modules)
    return weights, layers


def reference(weights: dict, layers: list, pooling: str, normalize: bool,
              texts: list[str] = TEXTS, unpooled: int = 0) -> np.ndarray:
    """What sentence-transformers computes for `texts`, by hand in float64; `unpooled`: the
    first positions its Pooling leaves out (include_prompt false: [CLS] and the prompt)."""
    index = {w: i for i, w in enumerate(TINY_VOCAB)}
    rows = [[2] + [index[w] for w in t.split()] + [3] for t in texts]
    seq = max(map(len, rows))
    ids = np.array([r + [0] * (seq - len(r)) for r in rows])
    mask = (ids != 0).astype(np.float64)
    x = forward(weights, ids, mask, np.zeros_like(ids), layers=2, heads=2)[0][-1]
    mask[:, :unpooled] = 0  # attention saw them; the pooling does not
    m = mask[..., None]
    positions = np.arange(1, seq + 1)[None, :, None] * m
    pooled = {
        "cls": x[:, 0],
        "mean": (x * m).sum(1) / m.sum(1),
        "max": np.where(m > 0, x, -1e9).max(1),
        "mean_sqrt_len_tokens": (x * m).sum(1) / np.sqrt(m.sum(1)),
        "weightedmean": (x * positions).sum(1) / positions.sum(1),
        "lasttoken": x[np.arange(len(rows)), [len(r) - 1 for r in rows]],
    }[pooling]
    acts = {"Tanh": np.tanh, "Identity": lambda v: v, "ReLU": lambda v: np.maximum(v, 0),
            "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}
    for w, b, activation in layers:
        pooled = acts[activation](pooled @ w.T.astype(np.float64) + b)
    if normalize:
        pooled = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled


def _vectors(export: str) -> np.ndarray:
    spec = encoder_spec(export)
    embedded = spec.build().embed(TEXTS)
    return embedded.vectors[spec.parsed_poolings()[0].column]


@pytest.mark.parametrize("pooling, dense, normalize", [
    ("cls", [(8, 5, "activation.Tanh")], True),
    ("mean", [(8, 6, "activation.ReLU"), (6, 4, "linear.Identity")], True),
    ("max", [], False),
    ("mean_sqrt_len_tokens", [(8, 3, "activation.Sigmoid")], False),
    ("weightedmean", [], True),
    ("lasttoken", [(8, 8, "activation.Tanh")], True),
])
def test_the_stack_matches_numpy(tmp_path, pooling, dense, normalize):
    root = str(tmp_path / "st")
    weights, layers = st_folder(root, pooling, dense, normalize)
    export = str(tmp_path / "export")
    meta = export_checkpoint(root, export)
    assert (meta["pooling"], meta["normalize"]) == (pooling, normalize)
    assert meta["output_width"] == (dense[-1][1] if dense else 8)
    assert [d["activation"] for d in meta["dense"]] == [
        {"Tanh": "tanh", "ReLU": "relu", "Identity": "identity", "Sigmoid": "sigmoid"}[a]
        for _, _, a in layers]
    expected = reference(weights, layers, pooling, normalize)
    ours = _vectors(export)
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=1e-4)


def _edit_modules(root: str, edit) -> None:
    path = os.path.join(root, "modules.json")
    with open(path) as f:
        modules = json.load(f)
    modules = edit(modules) or modules
    with open(path, "w") as f:
        json.dump(modules, f)


@pytest.mark.parametrize("edit, message", [
    (lambda ms: ms.insert(2, {"idx": 2, "name": "x", "path": "",
                              "type": ST + "LayerNorm"}), f"'x' ({ST}LayerNorm) is not reproduced"),
    (lambda ms: ms.append({"idx": 9, "name": "late", "path": "2_Dense", "type": ST + "Dense"}),
     f"'late' ({ST}Dense) is not reproduced"),  # a Dense after Normalize
    (lambda ms: [m for m in ms if "Pooling" not in m["type"]], "'2' (" + ST + "Dense) is not"),
])
def test_a_module_that_cannot_be_reproduced_is_refused_by_name(tmp_path, edit, message):
    root = str(tmp_path / "st")
    st_folder(root, "mean", [(8, 5, "activation.Tanh")], True)
    _edit_modules(root, edit)
    with pytest.raises(CheckpointError, match="modules.json") as e:
        export_checkpoint(root, str(tmp_path / "never"))
    assert message in str(e.value) and "\n" not in str(e.value)
    assert not os.path.exists(tmp_path / "never")


@pytest.mark.parametrize("change, message", [
    ({"pooling_mode_cls_token": True}, "concatenates the pooling modes ['cls', 'mean']"),
    ({"pooling_mode_mean_tokens": False}, "names no pooling mode"),
    ({"pooling_mode_future": True}, "has pooling modes ['pooling_mode_future']"),
])
def test_pooling_configs_it_cannot_reproduce_are_refused(tmp_path, change, message):
    root = str(tmp_path / "st")
    st_folder(root, "mean")
    path = os.path.join(root, "1_Pool", "config.json")
    with open(path) as f:
        cfg = json.load(f)
    _write_json(path, {**cfg, **change})
    with pytest.raises(CheckpointError, match="'1'") as e:
        export_checkpoint(root, str(tmp_path / "never"))
    assert message in str(e.value)


def test_an_unknown_dense_activation_is_refused(tmp_path):
    root = str(tmp_path / "st")
    st_folder(root, "mean", [(8, 5, "activation.Softplus")])
    with pytest.raises(CheckpointError, match="'torch.nn.modules.activation.Softplus'"):
        export_checkpoint(root, str(tmp_path / "never"))


def test_minilm_with_a_dense_layer_added(minilm_checkpoint, minilm_export, tmp_path):
    """The installed MiniLM with a Dense 384 -> 256 (tanh) between its Pooling and Normalize:
    its vectors are the plain export's mean pooling through that layer by hand, normalized."""
    import shutil

    root = str(tmp_path / "minilm-dense")
    shutil.copytree(minilm_checkpoint, root)
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((256, 384)) * 0.05).astype(np.float32)
    b = (rng.standard_normal(256) * 0.01).astype(np.float32)
    os.makedirs(os.path.join(root, "2_Dense"))
    save_file({"linear.weight": w, "linear.bias": b},
              os.path.join(root, "2_Dense", "model.safetensors"))
    _write_json(os.path.join(root, "2_Dense", "config.json"),
                {"in_features": 384, "out_features": 256, "bias": True,
                 "activation_function": "torch.nn.modules.activation.Tanh"})
    _edit_modules(root, lambda ms: [*ms[:2], {"idx": 2, "name": "2", "path": "2_Dense",
                                              "type": ST + "Dense"},
                                    {**ms[2], "idx": 3, "name": "3"}])
    export = str(tmp_path / "export")
    meta = export_checkpoint(root, export)
    assert (meta["pooling"], meta["normalize"], meta["output_width"]) == ("mean", True, 256)
    texts = ["A man is eating food.", "Ein Mann isst.", "café crème", "日本語のテキスト"]
    ours = encoder_spec(export).build().embed(texts).vectors["mean"]
    plain = encoder_spec(minilm_export, normalize=False).build().embed(texts).vectors["mean"]
    expected = np.tanh(plain.astype(np.float64) @ w.T + b)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert ours.shape == (4, 256)
    np.testing.assert_allclose(ours, expected, atol=1e-5)


def test_prompts_are_carried_and_applied_as_encode_applies_them(tmp_path):
    """config_sentence_transformers.json's prompts travel with the export; a run prepends the
    default prompt, the one named, or a literal one (none with ''), each against numpy on the
    prefixed texts; a Pooling with include_prompt false leaves [CLS] and the prompt's tokens
    out of its mean, as sentence-transformers does. A default prompt naming no prompt is refused
    at export."""
    import shutil

    root = str(tmp_path / "st")
    weights, _ = st_folder(root, "mean")
    _write_json(os.path.join(root, "config_sentence_transformers.json"),
                {"prompts": {"query": "cat dog ", "passage": "the river ", "document": ""},
                 "default_prompt_name": "passage"})
    export = str(tmp_path / "export")
    meta = export_checkpoint(root, export)
    assert meta["prompts"] == {"query": "cat dog ", "passage": "the river ", "document": ""}
    assert meta["default_prompt_name"] == "passage" and meta["warnings"] == []

    def expected(prefix: str) -> np.ndarray:
        return reference(weights, [], "mean", True, [prefix + t for t in TEXTS])

    for keywords, prefix, name in [({}, "the river ", "passage"),
                                   ({"prompt_name": "query"}, "cat dog ", "query"),
                                   ({"prompt": "a dog "}, "a dog ", None),
                                   ({"prompt": ""}, "", None),
                                   ({"prompt_name": "document"}, "", "document")]:
        spec = encoder_spec(export, **keywords)
        assert (spec.prompt, spec.prompt_name) == (prefix, name)
        ours = spec.build().embed(TEXTS)
        np.testing.assert_allclose(ours.vectors["mean"], expected(prefix), atol=2e-5, rtol=1e-4)
        assert list(ours.num_tokens) == [len((prefix + t).split()) + 2 for t in TEXTS]
    with pytest.raises(ValueError, match=r"unknown --prompt_name 'passages': st has the prompts "
                                         r"\['query', 'passage', 'document'\]"):
        encoder_spec(export, prompt_name="passages")
    with pytest.raises(ValueError, match="--long-text chunk does not take a prompt"):
        encoder_spec(export, long_text="chunk")
    with pytest.raises(ValueError, match="--granularity token does not take a prompt"):
        encoder_spec(export, granularity="token", prompt_name="query")
    assert encoder_spec(export, granularity="token", prompt="").prompt == ""

    without = str(tmp_path / "without-prompt-pooling")
    shutil.copytree(export, without)
    with open(os.path.join(without, "beam_embed.json")) as f:
        edited = {**json.load(f), "include_prompt": False}
    _write_json(os.path.join(without, "beam_embed.json"), edited)
    for keywords, prefix, unpooled in [({}, "the river ", 3), ({"prompt": "cat dog a "}, "cat dog a ", 4),
                                       ({"prompt": ""}, "", 0)]:
        ours = encoder_spec(without, **keywords).build().embed(TEXTS).vectors["mean"]
        expected = reference(weights, [], "mean", True, [prefix + t for t in TEXTS], unpooled)
        np.testing.assert_allclose(ours, expected, atol=2e-5, rtol=1e-4)
    assert encoder_spec(without).fingerprint() != encoder_spec(export).fingerprint()

    _write_json(os.path.join(root, "config_sentence_transformers.json"),
                {"prompts": {"query": "q: "}, "default_prompt_name": "passage"})
    with pytest.raises(CheckpointError, match="default_prompt_name 'passage', which is not one "
                                              r"of its prompts \['query'\]"):
        export_checkpoint(root, str(tmp_path / "never"))
