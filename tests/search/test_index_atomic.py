"""The search index is written under temporary names and renamed once complete: a search
stopped at any point leaves no partial file, and never an index that a later search uses."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from beam_embed.pipeline.search import index as index_module
from beam_embed.pipeline.search.corpus import Corpus, load_corpus
from beam_embed.pipeline.search.index import building, open_index
from tests.pca.fixtures import clustered_matrix, records, write_embeddings


def _corpus(folder, finished_at: str = "first run") -> Corpus:
    x, _ = clustered_matrix(50)
    write_embeddings(str(folder), records({"mean": x}), shards=2)
    return dataclasses.replace(load_corpus(str(folder), "mean"), finished_at=finished_at)


def _index_files(corpus: Corpus) -> list[str]:
    return sorted(os.listdir(os.path.join(corpus.folder, "search-index")))


def test_a_search_stopped_while_writing_the_stamp_leaves_no_index_to_use(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "out")
    complete = list(building(corpus, 16))  # an index of the first run, then a new run's
    assert open_index(corpus) is not None
    corpus = _corpus(tmp_path / "out", finished_at="second run")
    folder = tmp_path / "out" / "search-index"
    old = {name: (folder / name).read_bytes() for name in ("mean.json", "mean.npy")}
    real_dump = json.dump

    def dump_then_die(obj, f, **kwargs):  # killed halfway through writing the stamp
        f.write(json.dumps(obj)[:20])
        f.flush()
        raise KeyboardInterrupt

    monkeypatch.setattr(index_module.json, "dump", dump_then_die)
    with pytest.raises(KeyboardInterrupt):
        list(building(corpus, 16))
    monkeypatch.setattr(index_module.json, "dump", real_dump)
    assert open_index(corpus) is None  # rebuilt, not used (and no JSON error)
    # the first run's index and its stamp, as they were: no partial file under any name
    assert {name: (folder / name).read_bytes() for name in _index_files(corpus)} == old
    rebuilt = np.concatenate(list(building(corpus, 16)))
    np.testing.assert_array_equal(open_index(corpus), rebuilt)
    np.testing.assert_array_equal(rebuilt, np.concatenate(complete))
    assert _index_files(corpus) == ["mean.json", "mean.npy"]


def test_a_search_stopped_while_scanning_leaves_no_partial_file(tmp_path):
    corpus = _corpus(tmp_path / "out")
    blocks = building(corpus, 8)
    next(blocks)  # the first block scored, then the search stops (an error, Ctrl-C)
    blocks.close()
    assert _index_files(corpus) == []
    assert open_index(corpus) is None


def test_partial_files_of_killed_searches_are_removed(tmp_path):
    corpus = _corpus(tmp_path / "out")
    folder = tmp_path / "out" / "search-index"
    folder.mkdir()
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    (folder / f"mean.npy.partial-{dead}.npy").write_bytes(b"x" * 1000)
    (folder / f"mean.json.partial-{dead}.json").write_text("{")
    (folder / "mean.json").write_text("{\"column\": ")  # a stamp an older version cut short
    assert open_index(corpus) is None  # not a JSON error: rebuilt
    other = folder / f"mean.npy.partial-{os.getppid()}.npy"  # a live search's: kept
    other.write_bytes(b"x")
    list(building(corpus, 16))
    assert _index_files(corpus) == ["mean.json", "mean.npy", other.name]
