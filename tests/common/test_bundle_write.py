"""Files written inside bundles hold what Beam's sink steps write, and get Beam's shard names."""

from __future__ import annotations

import glob
import json
import os

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from beam_embed.pipeline.common.output_formats import parquet
from beam_embed.pipeline.common.run_folder.bundle_write import (
    WriteEachBundle,
    _WriteBundle,
    number_shards,
)
from beam_embed.pipeline.job.sinks import JsonLinesSink
from tests.common.test_parquet_sink import SCHEMA, _table

TEMPLATE = "-SSSSS-of-NNNNN"


def _bundle_files(sink, elements, max_bytes=0, size=None) -> list[str]:
    """One bundle through the DoFn as a runner calls it; the paths it outputs, in order."""
    fn = _WriteBundle(sink, max_bytes, size)
    fn.start_bundle()
    rolled = [path for e in elements for path in fn.process(e)]
    (out,) = list(fn.finish_bundle())
    return [*rolled, out.value]


def _bundle(sink, elements) -> str:
    (path,) = _bundle_files(sink, elements)
    return path


def test_a_bundle_rolls_its_file_before_an_element_that_would_pass_the_bound(tmp_path):
    sink = JsonLinesSink(str(tmp_path / "errors"), ".jsonl", TEMPLATE)
    lines = ["aaaa", "bb", "c", "dddddddddddd", "ee", "f"]  # 5, 3, 2, 13, 3, 2 bytes a line
    paths = _bundle_files(sink, lines, max_bytes=8, size=lambda line: len(line) + 1)
    # aaaa+bb (8) | c (2; +dd.. would pass) | dddddddddddd (13: alone, larger than the bound)
    # | ee+f (5)
    assert [open(p, "rb").read() for p in paths] == [b"aaaa\nbb\n", b"c\n", b"dddddddddddd\n",
                                                     b"ee\nf\n"]
    assert len(set(paths)) == 4


def test_each_bundle_writes_one_file_and_the_files_get_shard_names(tmp_path):
    prefix = str(tmp_path / "errors")
    sink = JsonLinesSink(prefix, ".jsonl", TEMPLATE)
    written = [_bundle(sink, lines)
               for lines in (["a", "b"], [], ['{"t": "é"}'])]
    assert all(os.path.exists(p) for p in written) and len(set(written)) == 3
    contents = {p: open(p, "rb").read() for p in written}
    other = str(tmp_path / "named-00000-of-00001.jsonl")  # a sink that named its shard
    named = number_shards([*written, other], TEMPLATE)
    assert named[0] == other
    assert named[1:] == [f"{prefix}-{i:05d}-of-00003.jsonl" for i in range(3)]
    # numbered in the order of the unique parts, each file's bytes kept
    assert [open(p, "rb").read() for p in named[1:]] == [contents[p] for p in sorted(written)]
    assert sorted(glob.glob(str(tmp_path / "*"))) == sorted(named[1:])
    assert sorted(contents.values()) == sorted([b"a\nb\n", b"", '{"t": "é"}\n'.encode()])


def test_in_bundle_files_hold_what_beams_sink_steps_write(tmp_path):
    rng = np.random.default_rng(0)
    tables = [_table(0, 5, rng), _table(5, 3, rng)]
    lines = [json.dumps({"id": i, "reason": "ünïcode"}, ensure_ascii=False) for i in range(4)]

    def write(folder, in_bundles):
        pq_prefix, js_prefix = str(tmp_path / folder / "emb"), str(tmp_path / folder / "err")
        pq_sink = parquet.sink(pq_prefix, SCHEMA, 0, ".parquet", TEMPLATE)
        js_sink = JsonLinesSink(js_prefix, ".jsonl", TEMPLATE)
        with beam.Pipeline() as p:
            if in_bundles:
                files = ((p | "T" >> beam.Create(tables)
                          | "P" >> WriteEachBundle(pq_sink)),
                         (p | "L" >> beam.Create(lines)
                          | "J" >> WriteEachBundle(js_sink)))
                _ = (files | beam.Flatten() | beam.combiners.ToList()
                     | beam.Map(number_shards, TEMPLATE))
            else:
                _ = p | "T" >> beam.Create(tables) | "P" >> beam.io.iobase.Write(pq_sink)
                _ = p | "L" >> beam.Create(lines) | "J" >> beam.io.WriteToText(
                    js_prefix, ".jsonl", shard_name_template=TEMPLATE)
        return sorted(os.listdir(tmp_path / folder))

    assert write("ours", True) == write("beam", False) == [
        "emb-00000-of-00001.parquet", "err-00000-of-00001.jsonl"]
    ours = pq.read_table(tmp_path / "ours" / "emb-00000-of-00001.parquet").sort_by("n")
    beams = pq.read_table(tmp_path / "beam" / "emb-00000-of-00001.parquet").sort_by("n")
    assert ours.schema == beams.schema == SCHEMA and ours.equals(beams)
    assert ours.equals(pa.concat_tables(tables))

    def read_lines(folder):
        return sorted((tmp_path / folder / "err-00000-of-00001.jsonl").read_bytes().splitlines())
    assert read_lines("ours") == read_lines("beam") == sorted(x.encode() for x in lines)
