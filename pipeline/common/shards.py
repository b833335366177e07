"""The manifest's shards as readers get them: every listed file present and undamaged, and row
counts adding up to the manifest's.

A run records each shard's row count in its manifest (`rows`): Parquet from the file's footer,
TFRecord by reading its records back. Readers check Parquet shards before reading any data (one
footer per file: a missing, truncated or swapped shard is named at once); TFRecord shards are
checked as they are read (`tfrecord_records`), since counting their records means reading them.
A damaged or missing shard is an IncompleteInput: one line naming the file, never fewer records
read without a word.
"""

from __future__ import annotations

from collections.abc import Iterator

from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.errors import IncompleteInput, one_line
from beam_embed.pipeline.common.output_formats import output_format


class DamagedFile(IncompleteInput):
    """A file that breaks off: `what` happened to it, without its path (dead letters name the
    file in their own fields)."""

    def __init__(self, path: str, what: str):
        super().__init__(f"{path} {what}")
        self.path, self.what = path, what


def _name(path: str) -> str:
    return FileSystems.split(path)[1]


def parquet_rows(path: str) -> int:
    """Rows in a Parquet file, from its footer; IncompleteInput when it is missing or damaged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with FileSystems.open(path) as f:
            return pq.ParquetFile(f).metadata.num_rows
    except (OSError, pa.ArrowException) as e:
        raise IncompleteInput(f"{path} is damaged: not a readable Parquet file ({one_line(e)}); "
                              "it was cut short or overwritten: restore it or rerun the job"
                              ) from e


# A TFRecord record's framing around its data: length (8 bytes), its CRC (4), the data's CRC (4).
TFRECORD_FRAMING = 16
TFRECORD_BATCH = 1024


def tfrecord_records(path: str, expected: int | None = None) -> Iterator[bytes]:
    """A TFRecord file's records (CRC-checked by tf.data); IncompleteInput naming the file when
    it is damaged, cut short, or holds another number of records than `expected`.

    Read in batches (one Python step per record was ~100x slower); when a batch breaks off, its
    whole records are read again one by one, so "after record N" is exact. tf.data reads a file
    cut inside a record's 12-byte header as if it ended there, so the records' framed sizes are
    added up and compared with the file's size (uncompressed files)."""
    import tensorflow as tf

    compressed = path.lower().endswith(".gz")
    dataset = tf.data.TFRecordDataset(path, compression_type="GZIP" if compressed else "")
    n = framed = 0
    try:
        try:
            for batch in dataset.batch(TFRECORD_BATCH).as_numpy_iterator():
                for record in batch:
                    n += 1
                    framed += len(record) + TFRECORD_FRAMING
                    yield record
        except tf.errors.OpError:  # the damage is somewhere in this batch: find where
            for record in dataset.skip(n).as_numpy_iterator():
                n += 1
                framed += len(record) + TFRECORD_FRAMING
                yield record
            raise
    except tf.errors.OpError as e:
        raise DamagedFile(path, f"is damaged ({tfrecord_cause(e)}) after record {n}") from e
    size = None if compressed else _size(path)
    if size is not None and framed != size:
        raise DamagedFile(path, f"is damaged (it ends with {size - framed} bytes that are not a "
                                f"whole record: cut short) after record {n}")
    if expected is not None and n != expected:
        raise IncompleteInput(f"{path} holds {n} records, but the manifest counts {expected} in "
                              "it; it was replaced or cut at a record boundary: restore it or "
                              "rerun the job")


def _size(path: str) -> int | None:
    found = FileSystems.match([path])[0].metadata_list
    return found[0].size_in_bytes if found else None


def tfrecord_cause(error) -> str:
    """TensorFlow's reason for a bad TFRecord file, in words."""
    message = (getattr(error, "message", "") or str(error)).strip()
    if "truncated record" in message or "Read less bytes" in message:
        return "the file ends in the middle of a record: cut short"
    if "corrupted record" in message or "checksum" in message.lower():
        return "a record's checksum does not match: corrupt data"
    return message.splitlines()[0] if message else type(error).__name__


def tfrecord_framed_records(path: str, size: int) -> int:
    """Records in an uncompressed TFRecord file of `size` bytes, from its framing alone: each
    record's length and the CRC of that length are read and checked, its data skipped, and the
    records must end exactly at the end of the file. The job counts the shards it just wrote
    this way: reading every record back through tf.data (data CRCs, one Python step a record)
    was ~0.2 s of a 20,000-sentence job's finish, all of it after the last batch; readers still
    check every record's CRC (tfrecord_records)."""
    import struct

    from apache_beam.io.filesystem import CompressionTypes

    from beam_embed.process.private_apis import masked_crc32c

    crc = masked_crc32c()
    n = offset = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        while offset < size:
            f.seek(offset)
            header = f.read(12)
            if len(header) < 12:
                raise DamagedFile(path, f"is damaged (it ends inside a record's header: cut "
                                        f"short) after record {n}")
            length, length_crc = struct.unpack("<QI", header)
            if crc(header[:8]) != length_crc:
                raise DamagedFile(path, f"is damaged (a record's length fails its checksum: "
                                        f"corrupt data) after record {n}")
            offset += length + TFRECORD_FRAMING
            n += 1
    if offset != size:
        raise DamagedFile(path, f"is damaged (its last record runs {offset - size} bytes past "
                                f"the end: cut short) after record {n - 1}")
    return n


def count_rows(path: str, fmt: str) -> int:
    """Rows in one shard the job wrote (read back: the manifest's `rows`), by its format's
    counter (beam_embed.pipeline.common.output_formats)."""
    return output_format(fmt).count_rows(path)


def tfrecord_rows(path: str) -> int:
    """Records in one TFRecord shard: from its framing when uncompressed, else read back."""
    size = None if path.lower().endswith(".gz") else _size(path)
    if size is None:  # compressed (its framing is inside), or missing (tf.data says so)
        return sum(1 for _ in tfrecord_records(path))
    return tfrecord_framed_records(path, size)


def check_shards(es, fmt: str) -> tuple[str, ...]:
    """`es`'s shards of `fmt`, checked: each exists; where rows are counted up front (Parquet's
    footers) each shard is readable and its rows match the manifest's per file and in total.
    Raises IncompleteInput naming the first bad one."""
    paths = es.files.get(fmt, ())
    listed = f"{es.manifest_path} lists it among the {len(paths)} {fmt} shards of that run"
    for path in paths:
        if not FileSystems.exists(path):
            raise IncompleteInput(f"{path} is missing: {listed}; restore it or rerun the job")
    entry = output_format(fmt)
    if not entry.rows_up_front:  # checked as they are read (tfrecord_records)
        return tuple(paths)
    total = 0
    for path in paths:
        n = entry.count_rows(path)
        expected = es.rows.get(_name(path))
        if expected is not None and n != expected:
            raise IncompleteInput(f"{path} holds {n} rows, but {es.manifest_path} counts "
                                  f"{expected}; it was replaced: restore it or rerun the job")
        total += n
    embedded = es.counts.get("embedded")
    if embedded is not None and total != embedded:
        raise IncompleteInput(f"the {entry.title} shards listed in {es.manifest_path} hold {total} rows,"
                              f" but it counts {embedded} embedded records; rerun the job")
    return tuple(paths)


def expected_rows(es, path: str) -> int | None:
    return es.rows.get(_name(path))
