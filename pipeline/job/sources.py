"""ReadCorpus: file patterns -> Records (cleaned, optionally split) + dead letters.

Patterns are matched on the launcher (Beam's FileSystems: local, gs://, others with their extra),
so a pattern matching no file fails before the job starts. Local patterns are matched here, with
Beam's pattern syntax, so that what a pattern matches but cannot be read (a folder, a dangling
symlink, a symlink loop: Beam passes over them without a word, or reads a folder named alone as
a corrupt file) is said and skipped. The fields the job reads are checked against each file's
schema (Parquet, CSV/TSV) or first records (JSONL, TFRecord) before the run. Files are read
whole by one worker each (decompressed by extension: decompress.py); a file that breaks off ends
in a dead letter saying where. The records are then reshuffled so that one big file still
spreads over every worker.
"""

from __future__ import annotations

import collections
import errno
import os
import re
import stat
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError, FileSystem
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.rows.records import EMPTY, INCOMPLETE, DeadLetter, Record
from beam_embed.pipeline.common.run_folder.buckets import (
    refuse_if_listing_found_no_bucket,
    refuse_missing_bucket,
)
from beam_embed.pipeline.job.cleaning import SentenceSplitter, clean_text
from beam_embed.pipeline.job.decompress import READ_ERRORS, open_input, why_incomplete
from beam_embed.pipeline.job.formats import (
    FIELDS,
    LINE_FORMATS,
    READERS,
    Fields,
    FileFields,
    detect_format,
)
from beam_embed.process.log import log
from beam_embed.process.terminal import printable

NAMESPACE = "beam_embed"
DEAD = "dead"
IDS = "ids"
ID_SHARDS = 16  # groups the ids are counted in, each by one worker
ID_CHUNK = 65_536  # ids a reader gathers before it hands them on

GLOB = re.compile(r"[*?[]")  # Beam's pattern characters
# What a pattern can match that is not read: kind -> (one, several, why it is not read)
FOLDER, DANGLING, LOOP = "folder", "dangling symlink", "symlink loop"
SKIPPED = {FOLDER: ("folder", "folders", "a folder is not read; '{path}/*' reads its files"),
           DANGLING: ("dangling symlink", "dangling symlinks", "its target does not exist"),
           LOOP: ("symlink loop", "symlink loops", "it leads back to itself")}
SCHEMA_READERS = 16  # Parquet footers (CSV headers) read at once: remote reads wait, not work


def expand_inputs(patterns: list[str]) -> list[tuple[str, int]]:
    """(path, size) for every file the patterns match, sorted, without duplicates.

    A folder named as a pattern is a ValueError (Beam would hand it to a reader, which fails as
    on a corrupt file); so is a pattern that matches no file it can read: a mistyped pattern
    among several would otherwise leave its files out of a run that looks complete. The folders,
    dangling symlinks and symlink loops that a pattern matches are skipped, one log line per
    kind with their count and an example."""
    for pattern in patterns:  # before any listing: the cheapest mistake is said first
        if _is_folder(pattern):
            raise ValueError(f"--input {pattern!r} is a directory; did you mean "
                             f"{pattern.rstrip('/') + '/*'!r}?")
    found: dict[str, int] = {}
    skipped: dict[str, dict[str, str]] = {kind: {} for kind in SKIPPED}
    for pattern in patterns:
        local = FileSystems.get_scheme(pattern) is None
        files, passed = _match_local(pattern) if local else _match_remote(pattern)
        _refuse_undecodable_names(pattern, files)
        if not files:
            if not local:  # nothing found: the bucket may be what is missing
                refuse_missing_bucket(pattern, "--input")
            if not passed and not local and _is_remote_folder(pattern):
                raise ValueError(f"--input {pattern!r} is a directory; did you mean "
                                 f"{pattern.rstrip('/') + '/*'!r}?")
            only = "" if not passed else f", only {_listed(passed)}"
            raise ValueError(f"--input {pattern!r} matches no file{only}; check the path or "
                             "pattern")
        found.update(files)
        for kind, path, shown in passed:
            skipped[kind].setdefault(path, shown)
    for kind, paths in skipped.items():
        if paths:
            one, several, why = SKIPPED[kind]
            path = min(paths)
            shown = paths[path]
            log(f"--input: skipped {len(paths)} {one if len(paths) == 1 else several}, e.g. "
                f"{shown} ({why.format(path=path)})")
    return sorted(_once_each(found).items())


def _refuse_undecodable_names(pattern: str, files: dict[str, int]) -> None:
    """A local file whose name is not UTF-8 (the file system hands it over with the bytes it
    cannot decode escaped): a ValueError naming it, its bytes shown as `\\xff`. The name
    goes into the ids and the `source` column, which hold UTF-8 text, so the run cannot write
    it; the user renames the file or leaves it out."""
    bad = sorted(p for p in files if not _is_utf8(p))
    if bad:
        shown = os.fsencode(bad[0]).decode("utf-8", "backslashreplace")
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise ValueError(f"--input {_shown(pattern)} matches a file whose name is not UTF-8: "
                         f"'{printable(shown)}'{more}; the output holds file names as UTF-8 text "
                         "(ids, the source column): rename it or leave it out of --input")


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(pattern: str) -> str:
    """`pattern` quoted, undecodable bytes of it shown as `\\xff`."""
    return f"'{printable(os.fsencode(pattern).decode('utf-8', 'backslashreplace'))}'" \
        if not _is_utf8(pattern) else repr(pattern)


def _once_each(found: dict[str, int]) -> dict[str, int]:
    """`found` (path -> size, in the order the patterns gave them) with each local file once,
    however many names lead to it (`d/a.jsonl`, `./d/a.jsonl`, a link to it): under a name
    that is not a link where there is one, else the first given; one log line when any was
    named twice. Object-store names are the objects' own, each listed once already."""
    names: dict[str, list[str]] = {}
    for path in found:
        key = os.path.realpath(path) if FileSystems.get_scheme(path) is None else path
        names.setdefault(key, []).append(path)
    twice = {key: paths for key, paths in names.items() if len(paths) > 1}
    if not twice:
        return found
    kept = {}
    for paths in names.values():
        own = [p for p in paths if not os.path.islink(p)] or paths
        kept[own[0]] = found[own[0]]
    example = twice[min(twice)]
    own = [p for p in example if p in kept][0]
    other = next(p for p in example if p != own)
    n = sum(len(paths) - 1 for paths in twice.values())
    log(f"--input: {len(twice)} file{'s' if len(twice) > 1 else ''} named more than once "
        f"({n} more name{'s' if n > 1 else ''}, e.g. {other!r} is {own!r}); each file is read "
        "once")
    return kept


def _is_folder(pattern: str) -> bool:
    """A local folder named alone (with a trailing slash Beam reads the files in it)."""
    return (FileSystems.get_scheme(pattern) is None and not GLOB.search(pattern)
            and not pattern.endswith(("/", os.sep)) and os.path.isdir(pattern))


def _is_remote_folder(pattern: str) -> bool:
    """A remote path without pattern characters that names no object but has objects below it."""
    if GLOB.search(pattern):
        return False
    try:
        below = FileSystems.match([pattern.rstrip("/") + "/**"], limits=[1])[0]
    except OSError:  # (Beam's BeamIOError) the pattern matching nothing is what is said then
        return False
    return bool(below.metadata_list)


def _listed(passed: list[tuple[str, str, str]]) -> str:
    """"1 folder ('d/sub') and 2 symlink loops (e.g. 'd/l1')"."""
    parts = []
    for kind, (one, several, _) in SKIPPED.items():
        shown = [s for k, _, s in passed if k == kind]
        if shown:
            parts.append(f"1 {one} ({shown[0]})" if len(shown) == 1 else
                         f"{len(shown)} {several} (e.g. {shown[0]})")
    return " and ".join(parts) if len(parts) < 3 else f"{parts[0]}, {parts[1]} and {parts[2]}"


def _match_remote(pattern: str) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """Beam's match; a folder placeholder object (a name ending in '/') is a folder. A bucket
    that does not exist is a MissingBucket (bad configuration), not Beam's failed match."""
    files: dict[str, int] = {}
    passed = []
    try:
        found = FileSystems.match([pattern])[0]
    except BeamIOError as e:
        refuse_if_listing_found_no_bucket(pattern, e, "--input")
        raise
    for meta in found.metadata_list:
        if meta.path.endswith("/"):
            if "**" not in pattern:  # else the folder's objects are matched too
                passed.append((FOLDER, meta.path.rstrip("/"), repr(meta.path.rstrip("/"))))
        else:
            files[meta.path] = meta.size_in_bytes
    return files, passed


def _match_local(pattern: str) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """Beam's local match (its pattern syntax: `*` within a folder, `**` across folders; a
    trailing slash reads the folder's files), returning also what it would pass over: (files:
    path -> size, [(kind, path, how it is shown)]). One walk, which descends only as deep as
    the pattern reaches (Beam walks the whole tree below the pattern's first folder). A
    relative pattern that starts with a pattern character (`*.txt`) matches in the current
    folder; Beam's match finds nothing there."""
    if pattern.endswith(("/", os.sep)):
        pattern += "*"
    prefix = GLOB.split(pattern, 1)[0]
    if prefix == pattern:  # a plain path (a folder was refused before)
        return _examine([(pattern, False)])
    root = os.path.dirname(prefix)
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    # `?`, `[...]` and `**` can match a '/': then every level below the root is looked at
    reach = None if re.search(r"\*\*|[?[]", pattern[len(root):]) else \
        len(pattern[len(root):].lstrip(os.sep).split(os.sep))
    crosses = "**" in pattern  # it reads inside the folders it matches: they are not skipped
    top = root or os.curdir
    entries, depths = [], {top: 0}
    for folder, dirs, names in os.walk(top):
        depth = depths[folder]
        for name, is_dir in [(d, True) for d in dirs] + [(n, False) for n in names]:
            path = os.path.join(folder, name)
            path = path if root else path[len(os.curdir) + 1:]
            if matches(path) and not (is_dir and crosses):
                entries.append((path, is_dir))
        if reach is not None and depth + 1 >= reach:
            dirs[:] = []  # nothing deeper can match
        depths.update((os.path.join(folder, d), depth + 1) for d in dirs)
    return _examine(sorted(entries))


def _examine(entries: list[tuple[str, bool]]) -> tuple[dict[str, int], list[tuple[str, str, str]]]:
    """The files among (path, listed as a folder) and what is not read. A file that cannot be
    examined for another reason (permissions) is kept: its reader says why, as a dead letter."""
    files, passed = {}, []
    for path, is_dir in entries:
        if is_dir:
            passed.append((FOLDER, path, repr(path)))
            continue
        try:
            files[path] = os.stat(path).st_size
        except OSError as e:
            if e.errno == errno.ELOOP:
                passed.append((LOOP, path, repr(path)))
            elif os.path.islink(path):
                passed.append((DANGLING, path, f"{path!r} -> {os.readlink(path)!r}"))
            elif e.errno != errno.ENOENT:  # gone since it was listed: as Beam, not a file
                files[path] = 0
    return files, passed


def check_columns(files: list[tuple[str, int]], input_format: str | None,
                  fields: Fields) -> list[FileFields]:
    """Each file's fields against those the job reads: a Parquet file's schema, a CSV/TSV
    file's header, the first records of a JSONL or TFRecord file (formats.FIELDS). A file
    without the --text_field would be read record by record to dead-letter every one, and one
    without the --id_field or a --metadata_fields column would give made-up ids or empty
    metadata. A ValueError names the flag, the field, the file and the fields it has. Only
    footers, headers and first records are read, several files at once (remote reads mostly
    wait); a file whose fields cannot be read is left to the run, where it becomes a dead
    letter saying why. Returns the fields of each file that could be read."""
    checked = [(path, fmt) for path, _ in files
               if (fmt := input_format or detect_format(path)) in FIELDS]
    if not checked:
        return []
    pool = ThreadPoolExecutor(min(SCHEMA_READERS, len(checked)))
    found = []
    try:
        for (path, _), file_fields in zip(checked, pool.map(_fields, checked)):
            problem = None if file_fields is None else fields.absent(file_fields)
            if problem:
                their = "their fields" if file_fields.sampled else "its columns"
                raise ValueError(f"{problem} of {file_fields.where(path)}; {their}: "
                                 f"{_names(file_fields.names)}")
            if file_fields is not None:
                found.append(file_fields)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return found


def _fields(file: tuple[str, str]) -> FileFields | None:
    path, fmt = file
    try:
        if not readable_before_the_run(path):
            return None
        with open_input(path) as f:
            return FIELDS[fmt](path, f)
    except READ_ERRORS:
        return None


def readable_before_the_run(path: str) -> bool:
    """Whether the launcher may read `path` before the run reads it: not a named pipe (what is
    read there would be lost to the run). An OSError when it cannot be examined."""
    return FileSystems.get_scheme(path) is not None or stat.S_ISREG(os.stat(path).st_mode)


def _names(columns: list[str], shown: int = 30) -> str:
    more = f" ({len(columns) - shown} more)" if len(columns) > shown else ""
    return (", ".join(columns[:shown]) or "(none)") + more


def read_file(path: str, fmt: str, fields: Fields) -> Iterator[Record | DeadLetter]:
    """Every record of one file, and a dead letter for each bad one. A file that breaks off
    (cut short, corrupt, unreadable) ends with one dead letter of kind INCOMPLETE naming the
    file, the last line (or record) read whole, and that the rest of the file was lost."""
    f, records = None, 0
    try:
        f = open_input(path)
        with f:
            for item in READERS[fmt](path, f, fields):
                records += 1
                yield item
    except READ_ERRORS as e:
        where = ("before its first line" if f is None else
                 f"after line {f.lines}" if fmt in LINE_FORMATS else f"after record {records}")
        # the path is the dead letter's id and source; a reason without it groups with alike
        yield DeadLetter.of(path, path, f"the file {why_incomplete(e)} {where}; the rest of the "
                            "file was lost", kind=INCOMPLETE)


class _ReadFile(beam.DoFn):
    """Each record of a file; with `ids`, also the records' ids, in lists by shard (IDS)."""

    def __init__(self, input_format: str | None, fields: Fields, total_bytes: int,
                 ids: bool = False):
        self._format = input_format
        self._fields = fields
        self._total = total_bytes
        self._ids = ids
        self._read = beam.metrics.Metrics.counter(NAMESPACE, "read")
        self._dead = beam.metrics.Metrics.counter(NAMESPACE, "dead_lettered")
        self._bytes = beam.metrics.Metrics.counter(NAMESPACE, "bytes_read")

    def process(self, file: tuple[str, int]):
        path, size = file
        ids = [] if self._ids else None
        for item in read_file(path, self._format or detect_format(path), self._fields):
            self._read.inc()
            if isinstance(item, DeadLetter):
                self._dead.inc()
                yield beam.pvalue.TaggedOutput(DEAD, item)
            else:
                if ids is not None:
                    ids.append(item.id)
                    if len(ids) >= ID_CHUNK:
                        yield from _by_shard(ids)
                        ids = []
                yield item
        if ids:
            yield from _by_shard(ids)
        self._bytes.inc(size)


def _by_shard(ids: list[str]):
    for found in shard_ids(ids):
        yield beam.pvalue.TaggedOutput(IDS, found)


def shard_ids(ids) -> Iterator[tuple[int, list[str]]]:
    """The ids in (shard, ids) lists by a hash that every worker computes alike (Python's own
    hash of a string differs from process to process): FindDuplicateIds' input."""
    shards = [[] for _ in range(ID_SHARDS)]
    for rid in ids:
        shards[zlib.crc32(rid.encode("utf-8", "surrogatepass")) % ID_SHARDS].append(rid)
    for shard, group in enumerate(shards):
        if group:
            yield shard, group


def _duplicates_in(shard_ids) -> tuple[int, str | None]:
    """(how many ids appear more than once, the smallest of them) in one shard's id lists."""
    _, groups = shard_ids
    counts = collections.Counter()
    for group in groups:
        counts.update(group)
    repeated = [rid for rid, n in counts.items() if n > 1]
    return len(repeated), min(repeated, default=None)


class _SumDuplicates(beam.CombineFn):
    """(n, smallest) of the shards -> the same for the run."""

    def create_accumulator(self):
        return 0, None

    def add_input(self, accumulator, found):
        return self.merge_accumulators([accumulator, found])

    def merge_accumulators(self, accumulators):
        accumulators = list(accumulators)
        ids = [rid for _, rid in accumulators if rid is not None]
        return sum(n for n, _ in accumulators), min(ids, default=None)

    def extract_output(self, accumulator):
        return accumulator


class FindDuplicateIds(beam.PTransform):
    """ReadCorpus's `ids` -> (how many ids appear more than once, the smallest of them, or None).

    The ids are gathered where the files are read, a list append per record, and cross the
    shuffle in lists: a step of its own per record with an (id, 1) pair each through Beam's
    combine cost ~26 us of CPU a record (a 500,000-record read on the local runner, 2 cores:
    +13 s and +170 MiB peak; gathered: +1.6 s, +46 MiB). They are counted in ID_SHARDS groups,
    one collections.Counter each, so no worker holds more than its shard's distinct ids."""

    def expand(self, ids):
        return (ids
                | "GroupByShard" >> beam.GroupByKey()
                | "CountInShard" >> beam.Map(_duplicates_in)
                | "SumShards" >> beam.CombineGlobally(_SumDuplicates()))


class PrepareTexts(beam.DoFn):
    """Whitespace clean-up, empty texts set aside, optional sentence or chunk splitting
    (`chunks`: a beam_embed.pipeline.job.chunking.Chunking, with --split chunks)."""

    def __init__(self, clean: bool, split: str, chunks=None):
        self._clean = clean
        self._split = split
        self._chunks = chunks
        self._splitter = None
        self._empty = beam.metrics.Metrics.counter(NAMESPACE, "skipped_empty")

    def setup(self):
        if self._split == "sentences":
            self._splitter = SentenceSplitter()
        elif self._split == "chunks":
            from beam_embed.pipeline.job.chunking import Chunker

            self._splitter = Chunker(self._chunks)

    def process(self, record: Record):
        records = prepared(record, self._clean, self._splitter)
        if records is None:
            self._empty.inc()
            yield beam.pvalue.TaggedOutput(DEAD, DeadLetter.of(
                record.id, record.source, "empty text", record.text, kind=EMPTY))
            return
        yield from records


def prepared(record: Record, clean: bool, splitter: SentenceSplitter | None) -> list | None:
    """The records the job embeds for `record`: its text cleaned up (`clean`) and split into
    sentences or chunks (a `splitter`; a chunker cuts the text as read: its offsets point
    into it); None when the text is empty."""
    if getattr(splitter, "reads_raw", False):
        return list(splitter(record)) if clean_text(record.text) else None
    text = clean_text(record.text) if clean else record.text
    if not text.strip():
        return None
    record = Record(record.id, text, record.source, record.meta)
    return list(splitter(record)) if splitter else [record]


class ReadCorpus(beam.PTransform):
    """Outputs `records` (Record) and `dead` (DeadLetter, read errors and empty texts); with
    `ids`, also `ids`: the ids of the records read, for FindDuplicateIds."""

    def __init__(self, files: list[tuple[str, int]], input_format: str | None, fields: Fields,
                 clean: bool = True, split: str = "none", spread: bool = True, ids: bool = False,
                 chunks=None):
        super().__init__()
        self._chunks = chunks  # --split chunks: a beam_embed.pipeline.job.chunking.Chunking
        self._ids = ids
        self._spread = spread  # reshuffle the records across workers (pointless with one)
        self._files = files
        self._format = input_format
        self._fields = fields
        self._clean = clean
        self._split = split

    def expand(self, pbegin):
        total = sum(size for _, size in self._files)
        read = (pbegin
                | "ListFiles" >> beam.Create(self._files)
                | "SpreadFiles" >> beam.Reshuffle()
                | "ReadFiles" >> beam.ParDo(_ReadFile(self._format, self._fields, total,
                                                      self._ids))
                .with_outputs(DEAD, IDS, main="records"))
        records = read.records
        if self._spread:  # one file is read by one worker: spread its records over all of them
            records = records | "SpreadRecords" >> beam.Reshuffle()
        prepared = (records
                    | "PrepareTexts" >> beam.ParDo(PrepareTexts(self._clean, self._split, self._chunks))
                    .with_outputs(DEAD, main="records"))
        dead = ((read[DEAD], prepared[DEAD]) | "MergeDeadLetters" >> beam.Flatten())
        return {"records": prepared.records, "dead": dead, "read_records": read.records,
                "read_dead": read[DEAD], **({"ids": read[IDS]} if self._ids else {})}
