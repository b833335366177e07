"""A Hugging Face Hub model id (`BAAI/bge-small-en-v1.5`, optionally `@revision`) as a model:
its files are downloaded with huggingface_hub into the cache folder's `hf/` (the Hub's own cache
layout, so a second run finds them and downloads nothing) and exported from there as a local
folder is (export_cache.py). A local path that exists always wins over an id of the same spelling.

Only the files an export reads are fetched: configs, the tokenizer's files and the safetensors
weights (not ONNX/OpenVINO copies or PyTorch duplicates). huggingface_hub honours HF_ENDPOINT
(a mirror, or the tests' loopback hub), HF_TOKEN and HF_HUB_OFFLINE. No TensorFlow at import.
"""

from __future__ import annotations

import os
import re

from beam_embed.models.cache_marks import made_folder
from beam_embed.models.export_cache import HF
from beam_embed.models.gcs_copy import cache_dir, writable_cache

# What export-model reads: config.json, modules.json, config_sentence_transformers.json,
# sentence_bert_config.json, the modules' configs, tokenizer.json/vocab.txt/
# sentencepiece.bpe.model and the weights (a Dense module's too).
ALLOW = ["*.json", "*.txt", "*.model", "*.safetensors", "*/pytorch_model.bin"]
IGNORE = ["onnx/*", "openvino/*", "*.onnx", "tf_model.h5", "flax_model.msgpack"]
# ORG/NAME as the Hub spells repo ids, with an optional @REVISION (a branch, tag or commit).
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(@(?P<rev>[\w./-]+))?$")


class HubError(ValueError):
    """A Hub model that cannot be had: one line saying what to do (configuration: exit 2)."""


def hub_id(model: str) -> tuple[str, str | None] | None:
    """(repo id, revision) when `model` is spelled as a Hub id and is no local path."""
    match = _HUB_ID.match(model)
    if not match or os.path.exists(model) or model.endswith((".", "-")):
        return None
    return match.group("repo"), match.group("rev")


def hub_name(repo: str) -> str:
    return repo.split("/", 1)[1]


def hub_source(repo: str, snapshot: str) -> str:
    """`ORG/NAME@COMMIT`: the Hub model and the commit its files were downloaded at (the
    snapshot folder huggingface_hub returns is named for the commit whatever revision was
    asked for), for the manifest."""
    return f"{repo}@{os.path.basename(os.path.normpath(snapshot))}"


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _what_to_do(repo: str) -> str:
    return (f"download it (e.g. `hf download {repo} --local-dir FOLDER`, or a git clone of "
            f"{_endpoint()}/{repo}) and give `--model FOLDER`, or set HF_ENDPOINT to a hub "
            "mirror this machine can reach")


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client's connection errors (not OSErrors) where huggingface_hub lets them out."""
    try:
        import httpx2

        return (httpx2.TransportError,)
    except ImportError:
        return ()


def downloaded(repo: str, revision: str | None = None, cached_only: bool = False) -> str:
    """The local folder of the Hub model `repo` at `revision` (default: main), downloaded on
    first use; a HubError in one line when it cannot be had. `cached_only`: never the network,
    and the cache left as it is (`beam-embed cache list` asks what the presets use)."""
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError as e:
        from beam_embed.process.versions import install_command

        raise HubError(f"{repo} is a Hugging Face Hub id, and downloading it needs the `hub` "
                       f"extra (huggingface_hub): {install_command('hub')}; or "
                       f"{_what_to_do(repo)}") from e
    folder = os.path.join(cache_dir(), HF)
    if cached_only and not os.path.isdir(folder):
        raise HubError(f"{repo} is not in the cache")
    if not cached_only:
        writable_cache(f"download {repo}")
        made_folder(folder, HF)
    where = f"{repo}@{revision}" if revision else repo
    try:  # the variables as they are now (huggingface_hub reads them once, at its import)
        return huggingface_hub.snapshot_download(
            repo, revision=revision, cache_dir=folder, allow_patterns=ALLOW,
            ignore_patterns=IGNORE, library_name="beam-embed", endpoint=_endpoint(),
            local_files_only=cached_only or _offline())
    except errors.RevisionNotFoundError as e:
        raise HubError(f"the Hub model {repo} has no revision {revision!r} at "
                       f"{_endpoint()}; give a branch, tag or commit it has") from e
    except (errors.RepositoryNotFoundError, errors.GatedRepoError) as e:
        raise HubError(f"{repo!r} is no local folder (relative to {os.getcwd()}), and "
                       f"{_endpoint()} has no model {repo} this machine may read (a typo, or a "
                       "private or gated repo: log in with `hf auth login` or set HF_TOKEN)"
                       ) from e
    except (OSError, *_transport_errors()) as e:  # unreachable, offline, a download cut short
        offline = " (HF_HUB_OFFLINE is set)" if _offline() else ""
        raise HubError(f"cannot download the Hub model {where} from {_endpoint()}{offline}, "
                       "and it is neither in the cache nor a local folder (relative to "
                       f"{os.getcwd()}): {_what_to_do(repo)}") from e
