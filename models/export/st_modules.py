"""A sentence-transformers folder's module stack (modules.json), read in its order from the paths
it names: Transformer, Pooling (every mode it writes), Dense (weights and activation), Normalize.

Each module changes the vector; one this exporter cannot reproduce is refused by name, never
dropped (a dropped Dense would write vectors of another width and meaning). The Dense layers are
saved with the export and applied after pooling at run time (models/dense_head.py).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from beam_embed.models.export.checkpoint import CheckpointError, load_json

MODULES_FILE = "modules.json"
CONFIG_FILE = "config_sentence_transformers.json"  # its prompts
ST = "sentence_transformers.models."
# sentence-transformers' Pooling config keys -> the run's pooling names
POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                 "pooling_mode_max_tokens": "max",
                 "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                 "pooling_mode_weightedmean_tokens": "weightedmean",
                 "pooling_mode_lasttoken": "lasttoken"}
# torch activation class names a Dense config writes -> models/dense_head.ACTIVATIONS
TORCH_ACTIVATIONS = {"torch.nn.modules.activation.Tanh": "tanh",
                     "torch.nn.modules.linear.Identity": "identity",
                     "torch.nn.modules.activation.ReLU": "relu",
                     "torch.nn.modules.activation.Sigmoid": "sigmoid"}
DENSE_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


@dataclasses.dataclass(frozen=True)
class Dense:
    weight: np.ndarray  # [out, in], as torch's Linear keeps it
    bias: np.ndarray | None  # [out]
    activation: str  # a models/dense_head.ACTIVATIONS key
    path: str  # the module's folder, for messages


@dataclasses.dataclass(frozen=True)
class Modules:
    transformer: str  # the Transformer's folder (config, weights, tokenizer)
    pooling: str
    normalize: bool
    dense: tuple[Dense, ...]
    include_prompt: bool
    types: tuple[str, ...]  # the modules' types, in order
    # config_sentence_transformers.json's prompts (name -> text) and default prompt's name
    prompts: tuple[tuple[str, str], ...] = ()
    default_prompt_name: str | None = None


def _refuse(path: str, module: dict, why: str) -> CheckpointError:
    return CheckpointError(f"{path}: {MODULES_FILE}'s module {module.get('name')!r} "
                           f"({module.get('type')}) {why}; its vectors would not be the model's")


def _config(root: str, module: dict) -> dict:
    path = os.path.join(root, str(module.get("path", "")), "config.json")
    if not os.path.isfile(path):
        raise _refuse(root, module, f"has no {path}; re-download the model")
    return load_json(path)


def _pooling(root: str, module: dict) -> tuple[str, bool]:
    cfg = _config(root, module)
    modes = [name for key, name in POOLING_MODES.items() if cfg.get(key)]
    unknown = sorted(k for k, v in cfg.items()
                     if k.startswith("pooling_mode") and v and k not in POOLING_MODES)
    if unknown or len(modes) != 1:
        what = (f"has pooling modes {unknown} this exporter does not know" if unknown else
                f"concatenates the pooling modes {modes}" if modes else "names no pooling mode")
        raise _refuse(root, module, f"{what}; one of {sorted(POOLING_MODES)} is reproduced")
    return modes[0], bool(cfg.get("include_prompt", True))


def _tensors(folder: str, module: dict, root: str) -> dict[str, np.ndarray]:
    for name in DENSE_WEIGHTS:
        file = os.path.join(folder, name)
        if not os.path.exists(file):
            continue
        if name.endswith(".safetensors"):
            from safetensors.numpy import load_file

            return load_file(file)
        try:
            import torch  # only for legacy .bin modules
        except ImportError as e:
            raise _refuse(root, module, f"holds {name}; reading it needs PyTorch (pip install "
                                        "torch) or a model.safetensors copy") from e
        state = torch.load(file, map_location="cpu", weights_only=True)
        return {k: v.float().numpy() for k, v in state.items()}
    raise _refuse(root, module, f"has no weights in {folder} (expected one of "
                                f"{list(DENSE_WEIGHTS)})")


def _dense(root: str, module: dict) -> Dense:
    folder = os.path.join(root, str(module.get("path", "")))
    cfg = _config(root, module)
    torch_name = cfg.get("activation_function", "torch.nn.modules.activation.Tanh")
    if torch_name not in TORCH_ACTIVATIONS:
        raise _refuse(root, module, f"uses the activation {torch_name!r}; expected one of "
                                    f"{sorted(TORCH_ACTIVATIONS)}")
    tensors = _tensors(folder, module, root)
    weight = tensors.get("linear.weight")
    shape = (cfg.get("out_features"), cfg.get("in_features"))
    if weight is None or weight.shape != shape:
        raise _refuse(root, module, f"has linear.weight {None if weight is None else weight.shape}"
                                    f" where its config says {shape}")
    bias = tensors.get("linear.bias") if cfg.get("bias", True) else None
    if cfg.get("bias", True) and (bias is None or bias.shape != (shape[0],)):
        raise _refuse(root, module, "lacks linear.bias of its out_features")
    return Dense(np.asarray(weight, np.float32),
                 None if bias is None else np.asarray(bias, np.float32),
                 TORCH_ACTIVATIONS[torch_name], folder)


def read_modules(root: str) -> Modules | None:
    """`root`'s module stack, or None when it has no modules.json. Refuses, naming the module, a
    stack other than Transformer, Pooling, Dense..., Normalize (in that order) or a module it
    cannot reproduce."""
    file = os.path.join(root, MODULES_FILE)
    if not os.path.exists(file):
        return None
    modules = load_json(file)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise CheckpointError(f"{file} is not a list of modules; re-download the model")
    transformer, pooling, include_prompt, normalize, dense = None, None, True, False, []
    for m in sorted(modules, key=lambda m: m.get("idx", 0)):
        kind = str(m.get("type", ""))
        short = kind[len(ST):] if kind.startswith(ST) else None
        if short == "Transformer" and transformer is None:
            transformer = os.path.join(root, str(m.get("path", "")))
        elif short == "Pooling" and transformer is not None and pooling is None:
            pooling, include_prompt = _pooling(root, m)
        elif short == "Dense" and pooling is not None and not normalize:
            dense.append(_dense(root, m))
        elif short == "Normalize" and pooling is not None and not normalize:
            normalize = True
        else:
            raise _refuse(root, m, "is not reproduced here (a stack of Transformer, Pooling, "
                                   "Dense..., Normalize, in that order, is)")
    if transformer is None or pooling is None:
        raise CheckpointError(f"{file} lacks a {'Transformer' if transformer is None else 'Pooling'}"
                              " module; a sentence-transformers BERT model has Transformer and "
                              "Pooling")
    return Modules(os.path.normpath(transformer), pooling, normalize, tuple(dense),
                   include_prompt, tuple(str(m.get("type")) for m in modules), *_prompts(root))


def _prompts(root: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """config_sentence_transformers.json's prompts and default prompt's name, which the export
    carries for runs to apply (models/prompts.py); refused when they are not what
    sentence-transformers would load."""
    path = os.path.join(root, CONFIG_FILE)
    cfg = load_json(path) if os.path.isfile(path) else {}
    prompts = cfg.get("prompts") or {}
    default = cfg.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise CheckpointError(f"{path} has prompts {prompts!r}; expected an object of prompt "
                              "names to texts")
    if default is not None and default not in prompts:
        raise CheckpointError(f"{path} has default_prompt_name {default!r}, which is not one of "
                              f"its prompts {sorted(prompts)}")
    return tuple(prompts.items()), default
