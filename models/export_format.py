"""What an export folder is called, which version of it this code writes, and the check that a
folder given as an export is whole (no TensorFlow at import: the job reads the names on its
start-up path, before any model is exported or loaded; the check imports it to read gs://).

A damaged export is refused before anything is loaded or written, each problem in one line
naming the file: without beam_embed.json, or with one that is not the metadata an export
writes, a run would silently use the wrong pooling, normalization or length; a variables file
cut short would fail deep inside TensorFlow's restore; a short vocabulary would tokenize wrong.
"""

import json
import os

METADATA_FILE = "beam_embed.json"
# 2: the preprocessor has tokenize_with_offsets; 3: encoder.bf16/.fp16; 4: encoder.fp32 (fused);
# 5: bf16/fp16 as their own SavedModels beside encoder/ (encoder_bf16/, encoder_fp16/)
FORMAT_VERSION = 5
ENCODER, PREPROCESSOR, VOCAB = "encoder", "preprocessor", os.path.join("assets", "vocab.txt")
REEXPORT = "export the checkpoint again with `beam-embed export-model`"
# The metadata keys a run reads, with the types they must have. Every format version writes the
# required ones; the others arrived later and have defaults.
REQUIRED = {"format_version": (int, "an integer"), "kind": (str, "a string"),
            "pooling": (str, "a string"), "normalize": (bool, "true or false"),
            "max_seq_length": (int, "an integer"), "vocab_size": (int, "an integer")}
OPTIONAL = {"name": (str, "a string"), "has_pooler": (bool, "true or false"),
            "max_position_embeddings": (int, "an integer"),
            "encoders": (dict, "an object (precision -> folder)"),
            "dense": (list, "a list of Dense layers")}
# What a run reads of the metadata that changes a vector (the model fingerprint covers it): all
# of the above but the name, which is shown, never computed with.
RUN_READS = tuple(k for k in {**REQUIRED, **OPTIONAL} if k != "name")
DENSE = "dense"  # the folder of a sentence-transformers model's Dense layers (dense_head.py)


def dense_files(meta: dict) -> list[str]:
    """The files (relative to the export) its metadata's Dense layers name."""
    layers = [d for d in meta.get("dense") or [] if isinstance(d, dict)]
    return [f for d in layers for f in (d.get("weight"), d.get("bias")) if isinstance(f, str)]


class ExportError(ValueError):
    """A folder given as an export that is not a whole one; the message names the file."""


def precision_folder(encoder: str, precision: str) -> str:
    """Where an export keeps the encoder for a low precision: `encoder/` -> `encoder_bf16/`."""
    return f"{encoder.rstrip('/')}_{precision}"


def looks_like_export(folder: str) -> bool:
    """The folders an export holds, whether or not its metadata is there."""
    import tensorflow as tf

    return all(tf.io.gfile.isdir(os.path.join(folder, sub)) for sub in (ENCODER, PREPROCESSOR))


def _wrong_type(value, expected: type) -> bool:
    return isinstance(value, bool) != (expected is bool) or not isinstance(value, expected)


def read_metadata(folder: str) -> dict:
    """The export's beam_embed.json, checked to hold what a run reads, else an ExportError
    (a local one read without TensorFlow)."""
    path = os.path.join(folder, METADATA_FILE)
    files = _gfile(path)
    if not files.exists(path):
        import tensorflow as tf

        if looks_like_export(folder):
            raise ExportError(
                f"{path} is missing: {folder} has the encoder/ and preprocessor/ of an export, "
                f"but without its metadata the model's pooling, normalization and length are "
                f"unknown; {REEXPORT}")
        try:
            found = sorted(n.rstrip("/") for n in tf.io.gfile.listdir(folder))
        except tf.errors.NotFoundError as e:
            raise ExportError(f"model folder {folder} does not exist") from e
        raise ExportError(
            f"{folder} is neither a `beam-embed export-model` folder (no {METADATA_FILE}, "
            f"{ENCODER}/, {PREPROCESSOR}/) nor a SavedModel (no saved_model.pb); it holds "
            f"{found[:12] or 'nothing'}{' ...' if len(found) > 12 else ''}")
    with (open(path, "rb") if files is os.path else files.GFile(path, "rb")) as f:
        raw = f.read()
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ExportError(f"{path} is not valid JSON ({e}); {REEXPORT}") from e
    if not isinstance(meta, dict):
        raise ExportError(f"{path} holds a JSON {type(meta).__name__}, not the object an export "
                          f"writes; {REEXPORT}")
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise ExportError(f"{path} lacks {missing}; an export's metadata has "
                          f"{list(REQUIRED)}; {REEXPORT}")
    wrong = [f"{k} {meta[k]!r} (expected {what})"
             for k, (expected, what) in {**REQUIRED, **OPTIONAL}.items()
             if k in meta and _wrong_type(meta[k], expected)]
    wrong += [f"{k} {meta[k]!r} (expected a positive integer)"
              for k in ("max_seq_length", "vocab_size", "max_position_embeddings")
              if isinstance(meta.get(k), int) and meta[k] < 1]
    if isinstance(meta.get("encoders"), dict) and not all(
            isinstance(v, str) and v for v in meta["encoders"].values()):
        wrong.append(f"encoders {meta['encoders']!r} (expected folder names)")
    if wrong:
        raise ExportError(f"{path} has {'; '.join(wrong)}; {REEXPORT}")
    return meta


def saved_models(meta: dict) -> list[str]:
    """The SavedModel folders of an export with this metadata: each precision's encoder (one
    folder before format 5), then the preprocessor."""
    encoders = list(dict.fromkeys(meta.get("encoders", {}).values())) or [ENCODER]
    return [*encoders, PREPROCESSOR]


def _gfile(path: str):
    """Python's file functions for a local path (checking an export loads no TensorFlow),
    TensorFlow's for another (a remote handle)."""
    from beam_embed.models.hub_loader import is_remote

    if not is_remote(path):
        return os.path
    import tensorflow as tf

    return tf.io.gfile


def _size(path: str) -> int:
    from beam_embed.models.hub_loader import is_remote

    if not is_remote(path):
        return os.path.getsize(path)
    import tensorflow as tf

    return tf.io.gfile.stat(path).length


def _check_vocab(folder: str, meta: dict) -> None:
    """The preprocessor's vocabulary has every entry the metadata counts: a short one would
    load and silently map the missing tokens' ids to nothing."""
    path = os.path.join(folder, PREPROCESSOR, VOCAB)
    files = _gfile(path)
    if not files.exists(path):
        raise ExportError(f"{path} is missing: the preprocessor's WordPiece vocabulary; "
                          f"{REEXPORT}")
    with (open(path, "rb") if files is os.path else files.GFile(path, "rb")) as f:
        text = f.read().replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    # lines as the export counted them (Python's universal newlines), the last may lack its \n
    entries = text.count(b"\n") + (not text.endswith(b"\n") and bool(text))
    if entries != meta["vocab_size"]:
        raise ExportError(f"{path} has {entries} entries where {METADATA_FILE}'s vocab_size is "
                          f"{meta['vocab_size']}; {REEXPORT}")


def check_export(folder: str) -> dict:
    """The export's metadata once its files are checked: the metadata, each SavedModel's
    saved_model.pb and variables (every data file as long as its index says), the vocabulary.
    Reads the small files only (no weights), without TensorFlow for a local folder: an
    ExportError names the first problem."""
    from beam_embed.models.hub_loader import HandleError, check_variables

    meta = read_metadata(folder)
    files = _gfile(folder)
    for sub in saved_models(meta):
        saved_model = os.path.join(folder, sub)
        if not files.isdir(saved_model):
            raise ExportError(f"{saved_model} is missing: {METADATA_FILE} lists it as one of "
                              f"the export's SavedModels; {REEXPORT}")
        pb = os.path.join(saved_model, "saved_model.pb")
        if not files.exists(pb) or _size(pb) == 0:
            state = "empty" if files.exists(pb) else "missing"
            raise ExportError(f"{pb} is {state}: the SavedModel's graph; {REEXPORT}")
        try:
            check_variables(saved_model, required=True, fix=REEXPORT)
        except HandleError as e:
            raise ExportError(str(e)) from e
    for name in dense_files(meta):
        if not files.exists(os.path.join(folder, name)):
            raise ExportError(f"{os.path.join(folder, name)} is missing: one of the Dense layers "
                              f"{METADATA_FILE} lists; {REEXPORT}")
    _check_vocab(folder, meta)
    return meta


def recorded_positions(encoder: str) -> int | None:
    """The token positions recorded in the beam_embed.json of the export that `encoder` (an
    export's SavedModel folder) is in, read without TensorFlow; None for another SavedModel
    (its positions are read from its variables, with TensorFlow)."""
    from beam_embed.models.gcs_copy import local_copy

    path = local_copy(os.path.join(os.path.dirname(encoder.rstrip("/")), METADATA_FILE))
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        recorded = json.loads(f.read()).get("max_position_embeddings")
    return int(recorded) if recorded else None
