"""The TensorBoard projector bundle parses with TensorBoard's own config proto and the TSV rules."""

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import text_format
from tensorboard.plugins.projector import projector_config_pb2

from beam_embed.pipeline.pca.projector import PROJECTOR_LIMIT, write_projector


def _parse_config(path):
    return text_format.Parse(path.read_text(), projector_config_pb2.ProjectorConfig())


def test_bundle_loads_with_the_projector_config_proto(tmp_path):
    tensors = np.random.default_rng(0).normal(size=(5, 3))
    metadata = pa.table({"id": ["a", "b", "c", "d", "e"],
                         "text": ["tab\there", "new\nline", "cr\rx", None, "plain"],
                         "num_tokens": pa.array([1, 2, 3, 4, 5], pa.int32())})
    write_projector(str(tmp_path), tensors, metadata, 'mean "PCA"-3', "sample: 5 of 9\nseed 0")

    config = _parse_config(tmp_path / "projector_config.pbtxt")
    (embedding,) = config.embeddings
    assert embedding.tensor_name == 'mean "PCA"-3'
    assert list(embedding.tensor_shape) == [5, 3]
    assert (tmp_path / embedding.tensor_path).is_file()
    assert (tmp_path / embedding.metadata_path).is_file()
    assert "# sample: 5 of 9\n# seed 0\n" in (tmp_path / "projector_config.pbtxt").read_text()

    np.testing.assert_allclose(np.loadtxt(tmp_path / "tensors.tsv", delimiter="\t"), tensors,
                               rtol=1e-6)
    lines = (tmp_path / "metadata.tsv").read_text().split("\n")
    assert lines[:-1] == ["id\ttext\tnum_tokens", "a\ttab here\t1", "b\tnew line\t2",
                          "c\tcr x\t3", "d\t\t4", "e\tplain\t5"]
    assert lines[-1] == ""


def test_single_column_metadata_has_no_header(tmp_path):
    write_projector(str(tmp_path), np.zeros((2, 2)), pa.table({"id": ["x", "y"]}), "t", "n")
    assert (tmp_path / "metadata.tsv").read_text() == "x\ny\n"


def test_more_points_than_the_projector_takes_are_refused(tmp_path):
    with pytest.raises(ValueError, match=f"at most {PROJECTOR_LIMIT} points; got 100001"):
        write_projector(str(tmp_path), np.zeros((PROJECTOR_LIMIT + 1, 2)),
                        pa.table({"id": ["x"] * (PROJECTOR_LIMIT + 1)}), "t", "n")
