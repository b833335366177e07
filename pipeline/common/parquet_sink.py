"""Parquet shards from pyarrow Tables, dictionary-encoding only the columns whose values repeat.

Beam's `WriteToParquetBatched` keeps pyarrow's default of dictionary-encoding every column. Float
columns (embeddings, PCA coordinates) never repeat: trying a dictionary on them made each
512-row batch of 384-wide vectors ~5x slower to write (measured 18.8 vs 3.4 ms) and the file
~1.5x larger; for 1M rows of 50 PCs 3.7 s of CPU against 0.7 s. This is the same sink (Beam's
FileBasedSink: shards, temp files, one row group per table written) with `use_dictionary`
limited to the columns given (by default the string columns: ids, sources, metadata).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.iobase import Write

from beam_embed.pipeline.common.staging import naming_file


class ParquetBatchSink(filebasedsink.FileBasedSink):
    def __init__(self, file_path_prefix: str, schema: pa.Schema, file_name_suffix: str = "",
                 num_shards: int = 0, shard_name_template: str | None = None,
                 compression: str = "none", dictionary: list[str] | None = None):
        super().__init__(file_path_prefix, coder=None, file_name_suffix=file_name_suffix,
                         num_shards=num_shards, shard_name_template=shard_name_template,
                         mime_type="application/x-parquet",
                         compression_type=CompressionTypes.UNCOMPRESSED)  # Parquet compresses
        self._schema = schema
        self._compression = compression
        self._dictionary = dictionary

    def dictionary_columns(self) -> list[str]:
        if self._dictionary is not None:
            return self._dictionary
        return [f.name for f in self._schema if pa.types.is_string(f.type)]

    def open(self, temp_path):
        handle = super().open(temp_path)
        # use_compliant_nested_type=False: list items named "item", as Beam's sink writes them
        return handle, pq.ParquetWriter(handle, self._schema, compression=self._compression,
                                        use_dictionary=self.dictionary_columns(),
                                        use_compliant_nested_type=False), temp_path

    def write_record(self, file_handle, value: pa.Table):
        with naming_file(file_handle[2]):  # a full disk's error names no file
            file_handle[1].write_table(value)

    def close(self, file_handle):
        handle, writer, path = file_handle
        with naming_file(path):
            writer.close()
            super().close(handle)


def write_parquet_batches(prefix: str, schema: pa.Schema, num_shards: int = 0,
                          suffix: str = ".parquet", shard_name_template: str | None = None,
                          **options):
    """The PTransform writing a PCollection of pyarrow Tables (`options`: compression,
    dictionary)."""
    return Write(ParquetBatchSink(prefix, schema, suffix, num_shards, shard_name_template,
                                  **options))
