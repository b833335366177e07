"""Beam's file-based sink around a format's own file writer, for every format's shards.

Beam's `FileBasedSink` gives the shards their names, temporary files and renames; the format
module gives `open_file(handle)`, an object that writes one element into the open file
(`write(element)`) and finishes it (`close()`). An OSError that names no file (write() on a full
disk fails with ENOSPC and no name) is given the file's path, so its one-line error says which.
Imported only by the formats' writers (it loads Beam).
"""

from __future__ import annotations

from collections.abc import Callable

from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes

from beam_embed.pipeline.common.run_folder.literal_paths import ExactFinalize, existing
from beam_embed.pipeline.common.run_folder.shard_digests import (
    HashingFile,
    sidecar,
    with_sidecars,
    write_sidecar,
)
from beam_embed.pipeline.common.run_folder.staging import naming_file


class FormatSink(ExactFinalize, filebasedsink.FileBasedSink):
    """`digests`: each file's size and SHA-256, hashed as it is written, are left beside it for
    the manifest (beam_embed.pipeline.common.run_folder.shard_digests), and move with it when it is
    renamed to its shard name."""

    def __init__(self, file_path_prefix: str, file_name_suffix: str, num_shards: int,
                 shard_name_template: str | None, open_file: Callable, mime_type: str,
                 compression_type: str = CompressionTypes.AUTO, digests: bool = False):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=file_name_suffix,
                         num_shards=num_shards, shard_name_template=shard_name_template,
                         mime_type=mime_type, compression_type=compression_type)
        self._open_file, self._digests = open_file, digests

    def open(self, temp_path):
        handle = super().open(temp_path)
        if self._digests:
            handle = HashingFile(handle)
        with naming_file(temp_path):
            return handle, self._open_file(handle), temp_path

    def write_record(self, file_handle, value):
        with naming_file(file_handle[2]):
            file_handle[1].write(value)

    def close(self, file_handle):
        handle, writer, path = file_handle
        with naming_file(path):
            writer.close()
            super().close(handle)
            if self._digests:
                write_sidecar(path, handle.digest())

    def files_to_rename(self, writer_results, num_shards, window=None):
        sources, destinations, deletes, skipped = super().files_to_rename(
            writer_results, num_shards, window)
        if self._digests:
            present = existing([sidecar(s) for s in sources])
            sources, destinations = with_sidecars(sources, destinations, present)
        return sources, destinations, deletes, skipped
