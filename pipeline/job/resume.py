"""--resume: a killed run continued in its own staging folder, keeping the shard sets it
committed (beam_embed.pipeline.common.run_folder.committed_shards) and embedding only the rest.

Every run of the job leaves an attempt record in its staging folder before it reads any data
(`ATTEMPT`): the model's fingerprint, every setting that decides a vector or a row, each input
file's size and modification time (a Cloud Storage object's update time changes with its
generation), and int8's ranges. A killed run leaves it with its commits (and its claim). A run
with --resume finds that staging folder (the one the dead claim names, else the latest), checks
that it continues the same run (a difference is bad configuration, said before anything is read
and with the kept work untouched), removes what no commit holds (the one open set per worker a
kill loses, dead letters, Beam's temporary files), and runs again with the kept records' keys
skipped at reading. Dead letters are decided again (they are cheap, and a record the kill
caught between its dead letter and its file is never lost); the counts of kept rows come from
their commits, so the published manifest counts as a clean run's does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.committed_shards import (
    COMMITS,
    COUNTED,
    KEYS,
    read_commits,
    read_keys,
    record_keys,
)
from beam_embed.pipeline.common.run_folder.manifest.entries import ResumeEntry
from beam_embed.process.log import log
from beam_embed.process.private_apis.beam import bundle_output

ATTEMPT = "resume.json"  # in the staging folder: what the run continues, checked on --resume
KEPT = "resume-kept.keys"  # in the staging folder: the kept records' keys, sorted, for workers
_KEEPS = {ATTEMPT, KEPT, ".beam-embed-staging.json"}  # never removed when preparing a resume
# Settings that decide neither a vector nor a row: free to change between attempts.
_FREE = ("output", "overwrite", "resume", "progress_every", "batch_tokens", "max_batch_size",
         "shard_mb", "store", "store_table", "store_sync", "allow_incomplete_input",
         "accelerator")


@dataclasses.dataclass(frozen=True)
class Attempt:
    """A killed run's staging folder and its attempt record."""
    staging: str
    run_id: str
    record: dict


@dataclasses.dataclass(frozen=True)
class Resumed:
    """What a resumed run keeps: the commits, their records' keys (a file for the workers), how
    many records they hold, their counts, and the attempt this is (the first is 1)."""
    commits: tuple
    keys_path: str
    records_kept: int
    counts: dict
    attempts: int

    def entry(self) -> ResumeEntry:
        return ResumeEntry(records_kept=self.records_kept, attempts=self.attempts)


def input_stamps(files) -> list[list]:
    """[path, size, modification time] for each input file (`files`: (path, size) pairs)."""
    paths = [p for p, _ in files]
    found = {}
    for result in FileSystems.match(paths) if paths else []:
        for m in result.metadata_list:
            found[m.path] = m.last_updated_in_seconds
    return [[p, int(size), round(float(found.get(p) or 0.0), 3)] for p, size in files]


def _settings(run) -> dict:
    """The run's settings that decide a vector or a row, as JSON."""
    values = dataclasses.asdict(run.settings)
    return json.loads(json.dumps({k: v for k, v in values.items() if k not in _FREE}))


def attempt_record(run, overwrite: bool) -> dict:
    """What a later --resume checks (see the module's docstring) and keeps (int8's ranges)."""
    return {"fingerprint": run.encoder.fingerprint(), "settings": _settings(run),
            "inputs": input_stamps(run.files),
            "stored": [dataclasses.asdict(s) for s in run.stored],
            "overwrite": overwrite, "attempts": 1,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def write_record(staging: str, record: dict) -> None:
    with FileSystems.create(FileSystems.join(staging, ATTEMPT)) as f:
        f.write(json.dumps(record).encode("utf-8"))


def _read_json(path: str):
    try:
        with FileSystems.open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_attempt(folder: str, claimed_by: str | None = None) -> Attempt | None:
    """The killed run in `folder` that --resume would continue: the staging folder of the run
    `claimed_by` names (the dead claim's run id), else the latest with an attempt record."""
    from beam_embed.pipeline.common.run_folder.staging import STAGING_PREFIX, run_stagings

    found = []
    for staging in run_stagings(folder):
        record = _read_json(FileSystems.join(staging, ATTEMPT))
        if record is not None and "settings" in record:
            run_id = staging.rstrip("/").rsplit("/", 1)[-1][len(STAGING_PREFIX):]
            found.append(Attempt(staging, run_id, record))
    for attempt in found:
        if attempt.run_id == claimed_by:
            return attempt
    return max(found, key=lambda a: a.record.get("started_at", ""), default=None)


def claimed_by(folder: str, options=None) -> str | None:
    """The run id of the claim on `folder`, if there is one."""
    from beam_embed.pipeline.common.run_folder.claim import Holder
    from beam_embed.pipeline.common.run_folder.claim_stores import store_for

    try:
        found = store_for(folder, options).read()
    except OSError:
        return None
    return Holder.parse(found[0]).run_id if found else None


def differences(record: dict, run) -> list[str]:
    """What differs between the killed attempt (`record`) and this run, in words."""
    out = []
    if record.get("fingerprint") != run.encoder.fingerprint():
        out.append(f"the model (fingerprint {record.get('fingerprint')}, this run's "
                   f"{run.encoder.fingerprint()})")
    theirs, ours = record.get("settings", {}), _settings(run)
    for key in sorted(set(theirs) | set(ours)):
        if theirs.get(key) != ours.get(key):
            out.append(f"--{key} {theirs.get(key)!r}, this run's {ours.get(key)!r}")
    before = {p: (size, mtime) for p, size, mtime in record.get("inputs", [])}
    now = {p: (size, mtime) for p, size, mtime in input_stamps(run.files)}
    for path in sorted(set(before) | set(now)):
        if path not in now:
            out.append(f"input {path} is gone")
        elif path not in before:
            out.append(f"input {path} is new")
        elif before[path] != now[path]:
            out.append(f"input {path} changed (size, modified: {before[path]} then, "
                       f"{now[path]} now)")
    return out


def check_same_run(attempt: Attempt, run) -> None:
    """A ValueError naming every difference: --resume continues only the same run, one whose
    every format is written in committed shard sets."""
    from beam_embed.pipeline.common.output_formats import output_format

    loose = [f for f in run.settings.format
             if output_format(f).open_part is None and output_format(f).open_batches is None]
    if loose:
        raise ValueError(f"--resume keeps committed shards, and --format {loose[0]} writes its "
                         "files at the end, committing none; expected formats with shards of "
                         "their own (parquet, tfrecord, lance), or --overwrite to start again")
    found = differences(attempt.record, run)
    if found:
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise ValueError(f"--resume continues the killed run in {attempt.staging} only with "
                         f"the same model, settings and input, and {shown}; run it as it was, "
                         "or pass --overwrite without --resume to discard its work")


def kept_storage(attempt: Attempt, run):
    """int8's ranges as the first attempt calibrated them (kept and new rows share one scale)."""
    from beam_embed.pipeline.common.rows.vector_dtypes import StoredVectors

    stored = attempt.record.get("stored") or []
    return tuple(StoredVectors(**{k: tuple(v) if isinstance(v, list) else v
                                  for k, v in s.items()}) for s in stored) or run.stored


def _kept_commits(staging: str) -> tuple[list[dict], np.ndarray]:
    """The commits kept, in set order, and their keys: a set whose records another kept set
    holds already (a bundle a runner ran twice) is dropped whole."""
    kept, parts, seen = [], [], np.zeros(0, np.uint64)
    for commit in read_commits(staging):
        try:
            keys = read_keys(staging, commit)
        except OSError:
            continue
        if len(keys) != commit["rows"] or np.isin(keys, seen).any():
            continue
        kept.append(commit)
        parts.append(keys)
        seen = np.union1d(seen, keys)
    return kept, (np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.uint64))


def _remove_uncommitted(staging: str, kept: list[dict]) -> int:
    """Deletes every file in `staging` no kept commit holds (but the attempt's own); returns
    how many."""
    from beam_embed.pipeline.common.run_folder.literal_paths import delete_files

    keep = {FileSystems.join(staging, n) for n in _KEEPS}
    for commit in kept:
        keep |= {FileSystems.join(staging, name) for name in commit["written"]}
        base = FileSystems.join(staging, COMMITS, commit["set"])
        keep |= {base + ".json", base + KEYS}
    gone = [p for p in _files_under(staging) if p not in keep]
    delete_files(gone)
    return len(gone)


def _files_under(folder: str) -> list[str]:
    from beam_embed.models.hub_loader import is_remote
    from beam_embed.pipeline.common.run_folder.literal_paths import objects_under

    if is_remote(folder):
        return objects_under(folder)
    return [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]


def prepare(attempt: Attempt) -> Resumed:
    """The killed attempt's staging folder made ready to continue in: what no commit holds
    removed, the kept records' keys written for the workers, the attempt counted."""
    kept, keys = _kept_commits(attempt.staging)
    _remove_uncommitted(attempt.staging, kept)
    keys_path = FileSystems.join(attempt.staging, KEPT)
    with FileSystems.create(keys_path) as f:
        f.write(keys.astype("<u8").tobytes())
    record = {**attempt.record, "attempts": int(attempt.record.get("attempts", 1)) + 1}
    write_record(attempt.staging, record)
    counts = {name: sum(int(c.get("counts", {}).get(name, 0)) for c in kept) for name in COUNTED}
    return Resumed(tuple(kept), keys_path, int(len(keys)), counts, record["attempts"])


class SkipKept(beam.DoFn):
    """Drops the records a kept set holds (their keys, sorted, in the file at `path`). Looked up
    a block of records at a time: one vectorized search per block costs a fraction of a numpy
    call per record, and a resumed run reads every record again (the kept ones too)."""

    BLOCK = 1024

    def __init__(self, path: str):
        self._path = path
        self._keys = None
        self._block: list = []

    def setup(self):
        from apache_beam.io.filesystem import CompressionTypes

        with FileSystems.open(self._path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            self._keys = np.frombuffer(f.read(), "<u8").astype(np.uint64)

    def start_bundle(self):
        self._block = []

    def process(self, record):
        self._block.append(record)
        if len(self._block) >= self.BLOCK:
            yield from self._new_records()

    def finish_bundle(self):
        for record in self._new_records():
            yield bundle_output(record)

    def _new_records(self) -> list:
        """The block's records that no kept set holds; the block emptied."""
        block, self._block = self._block, []
        if not block or not len(self._keys):
            return block
        keys = record_keys(block)
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        kept = self._keys[at] == keys
        return [record for record, k in zip(block, kept) if not k]


def say_resuming(resumed: Resumed, folder: str) -> None:
    log(f"--resume: continuing the killed run in {folder}: {len(resumed.commits)} committed "
        f"shard sets of {resumed.records_kept:,} records kept (attempt {resumed.attempts}); "
        "reading the input again for the rest")


def say_resumed(resumed: Resumed, folder: str) -> None:
    """The run's line once published: K of N records kept (N: every record read)."""
    from beam_embed.pipeline.common.run_folder.manifest.job import JobManifest

    try:
        read = JobManifest.read(folder).counts.read
    except ValueError:
        return
    log(f"resuming: {resumed.records_kept:,} of {read:,} records kept from the killed run "
        f"(attempt {resumed.attempts})")


def refuse_killed_work(folder: str) -> None:
    """An OutputBusy (exit 5) when `folder` holds a killed run's work and the run was given
    neither --resume nor --overwrite: that work is never discarded unasked."""
    from beam_embed.pipeline.common.run_folder.claim import OutputBusy

    attempt = find_attempt(folder)
    if attempt is not None:
        raise OutputBusy(f"--output {folder} holds the work of a run that did not finish "
                         f"({attempt.staging}, started {attempt.record.get('started_at')}); "
                         "pass --resume to continue it (the shards it committed are kept) or "
                         "--overwrite to discard it")
