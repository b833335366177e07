"""A local Hugging Face BERT-family checkpoint folder: its inspection and its tensors.

The weights are read with `safetensors` (one file or a sharded index); `pytorch_model.bin` needs
PyTorch, imported only for that. Tensor names are Hugging Face's; weight_map.py maps them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from beam_embed.models.export.checkpoint import (
    HUGGING_FACE,
    Checkpoint,
    CheckpointError,
    TokenizerSettings,
    activation_of,
    check_vocab,
    load_config,
    load_json,
)
from beam_embed.models.export.st_modules import read_modules
from beam_embed.models.export.tokenizer_json import TOKENIZER_JSON, read_tokenizer_json
from beam_embed.models.export.weight_map import HF_NAMES, Tensors
from beam_embed.models.export.xlmr_checkpoint import XLM_ROBERTA, position_offset, xlmr_tokenizer

SUPPORTED_MODEL_TYPES = ("bert", XLM_ROBERTA)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
# hidden_act -> our activation: transformers' "gelu" is the exact erf form (GELUActivation).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_pytorch_tanh",
               "relu": "relu"}
SAFETENSORS_PREFIX = 8  # the header's length, little-endian; the JSON header follows
REDOWNLOAD = "download the checkpoint's weights again"
ACTIVATION_NOTE = ("Hugging Face's hidden_act names: 'gelu' is the exact erf form, 'gelu_new' and "
                   "'gelu_pytorch_tanh' the tanh approximation")


def _sentence_bert_max_length(folder: str) -> int | None:
    st_file = os.path.join(folder, "sentence_bert_config.json")
    return load_json(st_file).get("max_seq_length") if os.path.exists(st_file) else None


def check_safetensors(file: str) -> None:
    """The file holds every byte its header places tensors at, else a CheckpointError naming
    it: safetensors itself refuses a file cut short without naming it ("incomplete metadata,
    file not fully covered"). Reads the header only."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        prefix = f.read(SAFETENSORS_PREFIX)
        length = int.from_bytes(prefix, "little")
        if len(prefix) < SAFETENSORS_PREFIX or SAFETENSORS_PREFIX + length > size:
            raise CheckpointError(f"{file} is cut short: {size} bytes, less than its header; "
                                  f"{REDOWNLOAD}")
        raw = f.read(length)
    try:
        header = json.loads(raw)
        ends = [t["data_offsets"][1] for name, t in header.items() if name != "__metadata__"]
        needed = SAFETENSORS_PREFIX + length + max(ends, default=0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
        raise CheckpointError(f"{file} is not a safetensors file: its header is damaged "
                              f"({type(e).__name__}: {e}); {REDOWNLOAD}") from e
    if size < needed:
        raise CheckpointError(f"{file} is cut short: {size} bytes where its header places "
                              f"tensors up to byte {needed}; {REDOWNLOAD}")


def _weights_file(path: str) -> str:
    for name in WEIGHT_FILES:
        if os.path.exists(os.path.join(path, name)):
            return os.path.join(path, name)
    raise CheckpointError(
        f"no weights in {path}: expected one of {list(WEIGHT_FILES)}; "
        "download the checkpoint's weight file into that folder"
    )


def inspect_hf_folder(root: str, lower_case: bool | None = None) -> Checkpoint:
    """Validates a Hugging Face folder (or a sentence-transformers one: the Transformer's files
    where its modules.json says); `lower_case` overrides tokenizer_config.json."""
    modules = read_modules(root)
    path = modules.transformer if modules else root
    config = load_config(path, "config.json")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{path}: model_type {model_type!r} is not a BERT-family architecture "
            "(BERT or XLM-RoBERTa); "
            f"expected one of {list(SUPPORTED_MODEL_TYPES)}"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            f"{path}: position_embedding_type {config['position_embedding_type']!r} is not "
            "supported; expected 'absolute'"
        )
    activation = activation_of(path, "config.json", config.get("hidden_act", "gelu"), ACTIVATIONS)
    weights = _weights_file(path)
    if weights.endswith(".safetensors"):
        check_safetensors(weights)
    tok_cfg_file = os.path.join(path, "tokenizer_config.json")
    tok_cfg = load_json(tok_cfg_file) if os.path.exists(tok_cfg_file) else {}
    model_max = tok_cfg.get("model_max_length")
    if not isinstance(model_max, int) or model_max > 100_000:  # HF writes 1e30 for "unset"
        model_max = None
    if model_type == XLM_ROBERTA:
        if lower_case is not None:
            raise CheckpointError(
                f"{path}: --lower-case/--no-lower-case is for WordPiece vocabularies; an "
                "XLM-RoBERTa model's SentencePiece model normalises text itself")
        tokenizer = xlmr_tokenizer(path, config, model_max)
        vocab = tokenizer.vocab_entries
    else:
        tokenizer, vocab = _wordpiece_tokenizer(path, config, tok_cfg, model_max, lower_case)
    # sentence-transformers' own default pooling is mean; a plain BERT checkpoint's is [CLS]
    pooling, normalize = (modules.pooling, modules.normalize) if modules else ("cls", False)
    st_max = _sentence_bert_max_length(path)
    max_positions = int(config["max_position_embeddings"]) - position_offset(config)
    max_len = min(x for x in (st_max, model_max, max_positions) if x)
    name = config.get("_name_or_path") or os.path.basename(os.path.normpath(root))
    return Checkpoint(
        path=path,
        name=os.path.basename(str(name).rstrip("/")) or "bert",
        layout=HUGGING_FACE,
        config=config,
        weights=weights,
        activation=activation,
        activation_note=ACTIVATION_NOTE,
        tokenizer=tokenizer,
        vocab_size=len(vocab),
        pooling=pooling,
        normalize=normalize,
        max_seq_length=max_len,
        dense=modules.dense if modules else (),
        include_prompt=modules.include_prompt if modules else True,
        modules=modules.types if modules else (),
        prompts=modules.prompts if modules else (),
        default_prompt_name=modules.default_prompt_name if modules else None,
    )


def _wordpiece_tokenizer(path: str, config: dict, tok_cfg: dict, model_max: int | None,
                         lower_case: bool | None) -> tuple[TokenizerSettings, list[str]]:
    """A BERT folder's WordPiece vocabulary (vocab.txt, else tokenizer.json) and settings."""
    fast = None
    if (not os.path.exists(os.path.join(path, "vocab.txt"))
            and os.path.exists(os.path.join(path, TOKENIZER_JSON))):
        fast = read_tokenizer_json(path)
        vocab_file, vocab = os.path.join(path, TOKENIZER_JSON), fast.vocab
        if len(vocab) != config["vocab_size"]:
            raise CheckpointError(
                f"{path}: {TOKENIZER_JSON} has {len(vocab)} vocabulary entries but config.json's "
                f"vocab_size is {config['vocab_size']}; the vocabulary does not belong to these "
                "weights")
        # as transformers' BertTokenizerFast: tokenizer_config.json's settings, when it has
        # them, override the normaliser's
        tok_cfg = {"do_lower_case": fast.lower_case, "strip_accents": fast.strip_accents,
                   **{k: v for k, v in tok_cfg.items() if v is not None}}
    else:
        vocab_file, vocab = check_vocab(path, config, "config.json")
    source = "tokenizer_config.json do_lower_case" if "do_lower_case" in tok_cfg else (
        "Hugging Face's default (no do_lower_case in tokenizer_config.json)")
    if fast is not None and tok_cfg["do_lower_case"] == fast.lower_case:
        source = f"{TOKENIZER_JSON} normalizer lowercase"
    if lower_case is not None:
        source = "--lower-case" if lower_case else "--no-lower-case"
    lower = bool(tok_cfg.get("do_lower_case", True)) if lower_case is None else lower_case
    strip = tok_cfg.get("strip_accents")
    tokenizer = TokenizerSettings(
        vocab_file=vocab_file,
        lower_case=lower,
        strip_accents=lower if strip is None else bool(strip),
        tokenize_chinese_chars=bool(tok_cfg.get("tokenize_chinese_chars", True)),
        model_max_length=model_max,
        lower_case_source=source,
        vocab_entries=tuple(vocab) if fast is not None else (),
    )
    return tokenizer, vocab


def _torch_state(ckpt: Checkpoint) -> dict:
    try:
        import torch  # only for legacy .bin checkpoints; never on workers
    except ImportError as e:
        raise CheckpointError(
            f"{ckpt.path} holds pytorch_model.bin; reading it needs PyTorch "
            "(pip install torch) or a model.safetensors copy of the weights") from e
    state = torch.load(ckpt.weights, map_location="cpu", weights_only=True)
    return {k: v.float().numpy() for k, v in state.items()}


def _shards(ckpt: Checkpoint) -> dict[str, str]:
    """Tensor name -> the safetensors file holding it (one file, or a sharded index)."""
    if not ckpt.weights.endswith(".index.json"):
        return {}
    weight_map = load_json(ckpt.weights).get("weight_map", {})
    files = {n: os.path.join(ckpt.path, f) for n, f in weight_map.items()}
    missing = sorted({f for f in files.values() if not os.path.exists(f)})
    if missing:
        raise CheckpointError(
            f"{ckpt.weights} names shards missing from {ckpt.path}: "
            f"{[os.path.basename(f) for f in missing]}; download every shard")
    for shard in sorted(set(files.values())):
        check_safetensors(shard)
    return files


def _safe_open(stack: contextlib.ExitStack, file: str):
    """safetensors' reader of `file`, whose errors name it."""
    from safetensors import SafetensorError, safe_open

    try:
        return stack.enter_context(safe_open(file, framework="np"))
    except SafetensorError as e:
        raise CheckpointError(f"{file} cannot be read as safetensors ({e}); {REDOWNLOAD}") from e


@contextlib.contextmanager
def open_hf_tensors(ckpt: Checkpoint) -> Iterator[Tensors]:
    """The checkpoint's tensors by Hugging Face name, read lazily from safetensors."""
    if ckpt.weights.endswith("pytorch_model.bin"):
        state = _torch_state(ckpt)
        yield Tensors(tuple(state), state.__getitem__, HF_NAMES)
        return
    files = _shards(ckpt)
    with contextlib.ExitStack() as stack:
        if not files:
            handle = _safe_open(stack, ckpt.weights)
            yield Tensors(tuple(handle.keys()), handle.get_tensor, HF_NAMES)
            return
        handles = {f: _safe_open(stack, f) for f in set(files.values())}
        yield Tensors(tuple(files), lambda n: handles[files[n]].get_tensor(n), HF_NAMES)
