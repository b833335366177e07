"""ReadCorpus: file patterns -> Records (cleaned, optionally split) + dead letters.

Patterns are matched on the launcher (Beam's FileSystems: local, gs://, others with their extra),
so a pattern matching no file fails before the job starts and the total size gives progress an
ETA. Files are read whole by one worker each (decompressed by extension: decompress.py); a file
that breaks off ends in a dead letter saying where. The records are then reshuffled so that one
big file still spreads over every worker.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.common.records import EMPTY, INCOMPLETE, DeadLetter, Record
from pipeline.job.cleaning import SentenceSplitter, clean_text
from pipeline.job.decompress import READ_ERRORS, open_input, why_incomplete
from pipeline.job.formats import LINE_FORMATS, READERS, Fields, detect_format

NAMESPACE = "beam_embed"
DEAD = "dead"


def expand_inputs(patterns: list[str]) -> list[tuple[str, int]]:
    """(path, size) for every file the patterns match, sorted, without duplicates. A pattern
    that matches nothing is a ValueError: a mistyped pattern among several would otherwise
    leave its files out of a run that looks complete."""
    found = {}
    for pattern, result in zip(patterns, FileSystems.match(list(patterns))):
        if not result.metadata_list:
            raise ValueError(f"--input {pattern!r} matches no file; check the path or pattern")
        for meta in result.metadata_list:
            found[meta.path] = meta.size_in_bytes
    return sorted(found.items())


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
    def __init__(self, input_format: str | None, fields: Fields, total_bytes: int):
        self._format = input_format
        self._fields = fields
        self._total = total_bytes
        self._read = beam.metrics.Metrics.counter(NAMESPACE, "read")
        self._dead = beam.metrics.Metrics.counter(NAMESPACE, "dead_lettered")
        self._bytes = beam.metrics.Metrics.counter(NAMESPACE, "bytes_read")

    def process(self, file: tuple[str, int]):
        path, size = file
        for item in read_file(path, self._format or detect_format(path), self._fields):
            self._read.inc()
            if isinstance(item, DeadLetter):
                self._dead.inc()
                yield beam.pvalue.TaggedOutput(DEAD, item)
            else:
                yield item
        self._bytes.inc(size)


class _Prepare(beam.DoFn):
    """Whitespace clean-up, empty texts set aside, optional sentence splitting."""

    def __init__(self, clean: bool, split: str):
        self._clean = clean
        self._split = split
        self._splitter = None
        self._empty = beam.metrics.Metrics.counter(NAMESPACE, "skipped_empty")

    def setup(self):
        if self._split == "sentences":
            self._splitter = SentenceSplitter()

    def process(self, record: Record):
        text = clean_text(record.text) if self._clean else record.text
        if not text.strip():
            self._empty.inc()
            yield beam.pvalue.TaggedOutput(DEAD, DeadLetter.of(
                record.id, record.source, "empty text", record.text, kind=EMPTY))
            return
        record = Record(record.id, text, record.source, record.meta)
        yield from (self._splitter(record) if self._splitter else [record])


class ReadCorpus(beam.PTransform):
    """Outputs `records` (Record) and `dead` (DeadLetter, read errors and empty texts)."""

    def __init__(self, files: list[tuple[str, int]], input_format: str | None, fields: Fields,
                 clean: bool = True, split: str = "none", spread: bool = True):
        super().__init__()
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
                | "ReadFiles" >> beam.ParDo(_ReadFile(self._format, self._fields, total))
                .with_outputs(DEAD, main="records"))
        records = read.records
        if self._spread:  # one file is read by one worker: spread its records over all of them
            records = records | "SpreadRecords" >> beam.Reshuffle()
        prepared = (records
                    | "PrepareTexts" >> beam.ParDo(_Prepare(self._clean, self._split))
                    .with_outputs(DEAD, main="records"))
        dead = ((read[DEAD], prepared[DEAD]) | "MergeDeadLetters" >> beam.Flatten())
        return {"records": prepared.records, "dead": dead, "read_records": read.records,
                "read_dead": read[DEAD]}
