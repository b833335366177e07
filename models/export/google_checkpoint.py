"""A google-research/bert checkpoint folder: bert_config.json, vocab.txt and a TF checkpoint.

The TF checkpoint is an explicit `--checkpoint` prefix, else the latest one a `checkpoint` file
names (what an Estimator fine-tune leaves: `model.ckpt-NNNN.*`), else the released
`bert_model.ckpt.*`, else the folder's only `*.index`. Variables are read with
`tf.train.load_checkpoint`: no PyTorch, no Keras.

Activation: google-research/bert's modeling.py computes hidden_act "gelu" with the tanh
approximation, 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), so "gelu" here is our "gelu_new"
(Hugging Face's "gelu" is the exact erf form).
Tokenization follows its tokenization.py: do_lower_case lower-cases with Python's str.lower (a
word-final Σ becomes ς) and also strips accents; words over 200 characters are [UNK].
bert_config.json does not say whether the vocabulary is cased: --lower-case/--no-lower-case
decides, else vocab.txt does (an uncased vocabulary has nothing that lower-casing changes).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from beam_embed.models.export.checkpoint import (
    GOOGLE,
    Checkpoint,
    CheckpointError,
    TokenizerSettings,
    activation_of,
    check_vocab,
    load_config,
    some,
)
from beam_embed.models.export.weight_map import GOOGLE_NAMES, Tensors

CONFIG_FILE = "bert_config.json"
RELEASED_PREFIX = "bert_model.ckpt"
ACTIVATIONS = {"gelu": "gelu_new", "gelu_new": "gelu_new", "relu": "relu"}
ACTIVATION_NOTE = ("google-research/bert's modeling.py computes hidden_act 'gelu' with the tanh "
                   "approximation (Hugging Face's 'gelu_new'), not the exact erf form")
_SPECIAL = re.compile(r"\[[^\[\]]+\]")  # [CLS], [unused0], ...: not evidence of casing


def _exists(prefix: str) -> bool:
    return bool(prefix) and os.path.exists(prefix + ".index")


def checkpoint_prefix(path: str, explicit: str | None = None) -> tuple[str, str]:
    """The TF checkpoint prefix to read, and how it was chosen."""
    if explicit is not None:
        for prefix in (explicit, os.path.join(path, explicit)):
            if _exists(prefix):
                return prefix, "--checkpoint"
        raise CheckpointError(
            f"--checkpoint {explicit!r}: no {explicit}.index there or in {path}; give the "
            "prefix the .index and .data-* files share, e.g. model.ckpt-1000")
    if os.path.exists(os.path.join(path, "checkpoint")):
        import tensorflow as tf

        unreadable = (f"{path}/checkpoint names no latest checkpoint (not a TF checkpoint state "
                      "file); pass --checkpoint PREFIX")
        try:
            state = tf.train.get_checkpoint_state(path)  # None when the file does not parse
        except ValueError as e:  # it parses but names no latest checkpoint
            raise CheckpointError(unreadable) from e
        if state is None:
            raise CheckpointError(unreadable)
        named = state.model_checkpoint_path
        # Estimators write absolute paths of the training machine: look beside the file too.
        for prefix in (named, os.path.join(path, os.path.basename(named))):
            if _exists(prefix):
                return prefix, "the latest in the checkpoint file"
        raise CheckpointError(
            f"{path}/checkpoint names {named!r} as the latest checkpoint, but "
            f"{os.path.basename(named)}.index is not in {path}; copy it there or pass "
            "--checkpoint PREFIX")
    indexes = sorted(f[: -len(".index")] for f in os.listdir(path) if f.endswith(".index"))
    if RELEASED_PREFIX in indexes:
        return os.path.join(path, RELEASED_PREFIX), f"{RELEASED_PREFIX}, as released"
    if len(indexes) == 1:
        return os.path.join(path, indexes[0]), "the folder's only TF checkpoint"
    if not indexes:
        raise CheckpointError(
            f"{path} has {CONFIG_FILE} but no TF checkpoint ({RELEASED_PREFIX}.index, or "
            f"model.ckpt-N.index with a checkpoint file); found: {some(os.listdir(path))}")
    raise CheckpointError(
        f"{path} holds several TF checkpoints {indexes} and no checkpoint file naming the "
        "latest; pass --checkpoint PREFIX")


def infer_lower_case(vocab: list[str]) -> tuple[bool, str]:
    """Uncased when no entry (special tokens aside) changes under lower-casing."""
    cased = [t for t in vocab if not _SPECIAL.fullmatch(t) and t.lower() != t]
    if cased:
        return False, (f"inferred from vocab.txt: {len(cased)} of {len(vocab)} entries change "
                       f"under lower-casing (e.g. {cased[:3]}), so the model is cased")
    return True, ("inferred from vocab.txt: no entry besides [special] tokens changes under "
                  "lower-casing, so the model is uncased")


def inspect_google_folder(path: str, checkpoint: str | None = None,
                          lower_case: bool | None = None) -> Checkpoint:
    config_file = os.path.join(path, CONFIG_FILE)
    if not os.path.exists(config_file):
        raise CheckpointError(
            f"{path} has no {CONFIG_FILE}; --checkpoint needs the google-research/bert folder "
            f"(bert_config.json, vocab.txt) as SRC; found: {some(os.listdir(path))}")
    config = load_config(path, CONFIG_FILE)
    activation = activation_of(path, CONFIG_FILE, config.get("hidden_act", "gelu"), ACTIVATIONS)
    vocab_file, vocab = check_vocab(path, config, CONFIG_FILE)
    prefix, found_by = checkpoint_prefix(path, checkpoint)
    if lower_case is None:
        lower_case, source = infer_lower_case(vocab)
    else:
        source = "--lower-case" if lower_case else "--no-lower-case"
    tokenizer = TokenizerSettings(
        vocab_file=vocab_file,
        lower_case=lower_case,
        strip_accents=lower_case,  # tokenization.py strips accents exactly when it lower-cases
        tokenize_chinese_chars=True,
        model_max_length=None,
        lower_case_source=source,
        flavor=GOOGLE,
    )
    return Checkpoint(
        path=path,
        name=os.path.basename(os.path.normpath(path)) or "bert",
        layout=GOOGLE,
        config=config,
        weights=prefix,
        weights_note=found_by,
        activation=activation,
        activation_note=ACTIVATION_NOTE,
        tokenizer=tokenizer,
        vocab_size=len(vocab),
        pooling="cls",
        normalize=False,
        max_seq_length=int(config["max_position_embeddings"]),
    )


@contextlib.contextmanager
def open_google_tensors(ckpt: Checkpoint) -> Iterator[Tensors]:
    """The TF checkpoint's variables by name, read one at a time."""
    import tensorflow as tf

    def fail(e: Exception):
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return CheckpointError(f"{ckpt.weights}: not a readable TF checkpoint ({first})")

    try:
        reader = tf.train.load_checkpoint(ckpt.weights)
    except (tf.errors.OpError, ValueError) as e:
        raise fail(e) from e

    def read(name: str):
        try:
            return reader.get_tensor(name)
        except tf.errors.OpError as e:
            raise fail(e) from e

    yield Tensors(tuple(reader.get_variable_to_shape_map()), read, GOOGLE_NAMES)
