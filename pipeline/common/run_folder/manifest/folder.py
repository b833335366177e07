"""The output folder's names (the manifest's, the shards' and dead letters' prefixes, their
template), what one command writes there (`OutputKind`, for the checks that decide what a new
run may replace: beam_embed.pipeline.common.run_folder.staging), the folder made when missing
(make_folder), and manifest.json as bytes: written, read back as a JSON object with the SHA-256
of what was read, hashed as it is now.
The typed manifests (job.py, pca.py) are the only code that writes and reads it through these.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.buckets import refuse_missing_bucket
from beam_embed.pipeline.common.settings.errors import IncompleteInput, one_line

MANIFEST = "manifest.json"
PREFIX = "embeddings"
ERRORS_PREFIX = "errors"
SHARD_TEMPLATE = "-SSSSS-of-NNNNN"
JOB_OUTPUTS = (MANIFEST, f"{PREFIX}-*", f"{ERRORS_PREFIX}-*")  # names that look like outputs


@dataclass(frozen=True)
class OutputKind:
    """What one command writes into its output folder, for the checks that decide what a new
    run may replace there (beam_embed.pipeline.common.run_folder.staging): only the files a manifest
    of this kind lists are ever replaced or deleted."""
    command: str  # for messages: "beam-embed run"
    patterns: tuple[str, ...]  # globs: names that look like its outputs
    names: re.Pattern  # the names it writes (relative paths): an unlisted one would be clobbered
    listed: Callable[[dict], list[str]]  # a manifest's files, relative to the folder
    recognizes: Callable[[dict], bool]  # whether a manifest is one of this command's
    resumable: bool = False  # a killed run's work is kept for its --resume


def make_folder(folder: str, flag: str = "--output") -> bool:
    """Creates `folder` (and its parents) unless it exists; whether it did. A ValueError in one
    line when it cannot be."""
    try:
        if FileSystems.exists(folder):
            return False
        FileSystems.mkdirs(folder)
        return True
    except OSError as e:  # a parent is a regular file, no permission, ...
        raise ValueError(f"{flag} {folder!r} cannot be created ({one_line(e)})") from e


def write_json(folder: str, data: dict) -> None:
    with FileSystems.create(FileSystems.join(folder, MANIFEST)) as f:
        f.write(json.dumps(data, indent=2).encode("utf-8"))


def read_json(folder: str) -> tuple[dict, str]:
    """`folder`'s manifest as JSON, and the SHA-256 (hex) of the bytes it was read from; a
    ValueError in one line when the folder holds none; an IncompleteInput (a damaged input
    file) when it holds something that is not a JSON object."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        refuse_missing_bucket(folder)  # no manifest there: a bucket that does not exist says so
        raise ValueError(f"no {MANIFEST} in {folder!r}: expected the output folder of a finished "
                         f"`beam-embed run` (a run writes its {MANIFEST} last: a folder that holds "
                         f"no {MANIFEST} holds no finished run)")
    with FileSystems.open(path) as f:
        raw = f.read()
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IncompleteInput(f"{path} is not valid JSON ({e}): it is damaged; rerun the job "
                              "that wrote it") from e
    if not isinstance(data, dict):
        raise IncompleteInput(f"{path} holds {json_kind(data)}, not the JSON object a run "
                              "writes: it is damaged or not a manifest; rerun the job that "
                              "wrote it")
    return data, hashlib.sha256(raw).hexdigest()


def json_kind(value) -> str:
    """What a JSON value is, for messages: 'a JSON list', 'null', ..."""
    if value is None:
        return "null"
    kinds = {bool: "a JSON boolean", str: "a JSON string", list: "a JSON list",
             dict: "a JSON object", int: "a JSON number", float: "a JSON number"}
    return kinds.get(type(value), type(value).__name__)



def manifest_sha256(folder: str) -> str | None:
    """The SHA-256 (hex) of `folder`'s manifest as it is now; None when there is none."""
    path = FileSystems.join(folder, MANIFEST)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as f:
        return hashlib.sha256(f.read()).hexdigest()
