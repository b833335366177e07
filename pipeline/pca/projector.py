"""A TensorBoard Embedding Projector bundle: tensors.tsv, metadata.tsv, projector_config.pbtxt.

Point TensorBoard at the folder (`tensorboard --logdir FOLDER`, Projector tab) or load the two TSVs
at projector.tensorflow.org. The projector holds at most PROJECTOR_LIMIT points, so callers pass
a sample; the sampling note goes into the config as a comment.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.staging import naming_file
from beam_embed.pipeline.pca.limits import PROJECTOR_LIMIT

TENSORS, METADATA, CONFIG = "tensors.tsv", "metadata.tsv", "projector_config.pbtxt"


def _write(path: str, text: str) -> None:
    with naming_file(path), FileSystems.create(path) as f:  # a full disk's error names no file
        f.write(text.encode("utf-8"))


def _tsv_cell(column: pa.ChunkedArray) -> list[str]:
    """A column as TSV cells: strings with tabs and line breaks turned into spaces."""
    text = pc.cast(column, pa.string()).fill_null("")
    return pc.replace_substring_regex(text, r"[\t\r\n]", " ").to_pylist()


def metadata_tsv(metadata: pa.Table) -> str:
    """One line per point; a header row only when there are several columns (projector rule)."""
    columns = [_tsv_cell(metadata.column(c)) for c in metadata.column_names]
    lines = ["\t".join(row) for row in zip(*columns)]
    if len(columns) > 1:
        lines.insert(0, "\t".join(metadata.column_names))
    return "\n".join(lines) + "\n"


def _quoted(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_pbtxt(tensor_name: str, shape: tuple[int, int], note: str) -> str:
    comments = "".join(f"# {line}\n" for line in note.splitlines())
    return (f"{comments}embeddings {{\n"
            f"  tensor_name: {_quoted(tensor_name)}\n"
            f"  tensor_shape: {shape[0]}\n  tensor_shape: {shape[1]}\n"
            f"  tensor_path: {_quoted(TENSORS)}\n"
            f"  metadata_path: {_quoted(METADATA)}\n}}\n")


def write_projector(folder: str, tensors: np.ndarray, metadata: pa.Table, tensor_name: str,
                    note: str) -> dict:
    """Writes the bundle into `folder`; returns the file names written."""
    if len(tensors) > PROJECTOR_LIMIT:
        raise ValueError(f"the projector loads at most {PROJECTOR_LIMIT} points; got "
                         f"{len(tensors)}")
    if len(tensors) != metadata.num_rows:
        raise ValueError(f"{len(tensors)} tensors but {metadata.num_rows} metadata rows")
    buf = io.StringIO()
    np.savetxt(buf, tensors, fmt="%.7g", delimiter="\t")
    _write(FileSystems.join(folder, TENSORS), buf.getvalue())
    _write(FileSystems.join(folder, METADATA), metadata_tsv(metadata))
    _write(FileSystems.join(folder, CONFIG), config_pbtxt(tensor_name, tensors.shape, note))
    return {"tensors": TENSORS, "metadata": METADATA, "config": CONFIG}
