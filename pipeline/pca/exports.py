"""Exports for people, made on the launcher from the sample the pipeline wrote: a TensorBoard
projector bundle, an interactive HTML scatter and a PNG of it. Bounded by the sample size, so
workers need neither plotting libraries nor memory for them."""

from __future__ import annotations

import io
import logging
import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.run_folder.manifest.pca import PcaPlot, PcaProjector, PcaSample
from beam_embed.pipeline.common.run_folder.staging import naming_file
from beam_embed.pipeline.pca import plots, projector
from beam_embed.pipeline.pca.maps import axis_labels, compute_map, drawn_method, map_title
from beam_embed.pipeline.pca.project import pc_names
from beam_embed.pipeline.pca.sample import METHOD, read_sample
from beam_embed.process.log import log

PROJECTOR_DIR, HTML_FILE, PNG_FILE = "projector", "plot.html", "plot.png"


@dataclass(frozen=True)
class ExportSpec:
    """What the exports show, and the folder they go to."""
    folder: str
    components: int
    model: str
    pooling: str
    method: str
    dims: int
    color_by: str
    seed: int


def _draw_once() -> None:
    """A two-point figure through both libraries, thrown away: their imports, plotly's template
    and figure validators, matplotlib's fonts and Agg renderer, all set up."""
    coords = np.array([[0.0, 0.0], [1.0, 1.0]])
    colors = plots.Coloring("warm-up", np.array([0.0, 1.0]), ())
    table = pa.table({"id": ["a", "b"], "source": ["", ""]})
    plots.scatter_figure(coords, table, colors, "warm-up", ["x", "y"]).to_html(
        include_plotlyjs=False, full_html=False)
    plots.draw_png(coords, colors, "warm-up", ["x", "y"], io.BytesIO())


def start_warm_up() -> threading.Thread:
    """_draw_once on a thread, started before the pipeline runs: a first export spent ~0.7 s of
    its ~1.2 s setting the plotting libraries up (measured, 1M-row job), while the pipeline
    spends most of its time in BLAS and Arrow with the GIL released. Join it before exporting;
    a failure here is only logged (the export itself reports it)."""
    def warm() -> None:
        try:
            _draw_once()
        except Exception as e:  # noqa: BLE001
            logging.getLogger(__name__).debug("plot warm-up failed: %s", e)

    thread = threading.Thread(target=warm, name="plot-warm-up", daemon=True)
    thread.start()
    return thread


def sampling_note(info: dict) -> str:
    """One line on what the points are, for titles, the projector config and the log."""
    if info["size"] == info["of"]:
        return f"all {info['of']:,} records"
    return (f"a deterministic sample of {info['size']:,} of {info['of']:,} records "
            f"({METHOD}, seed {info['seed']})")


def export_sample(sample_path: str, spec: ExportSpec, variance_ratio=None) -> dict:
    """Writes the projector bundle, plot.html and plot.png; returns what the manifest records.
    `variance_ratio` (each PC's share of the variance) labels the PCA axes."""
    table, info = read_sample(sample_path)
    if table.num_rows < 2:
        raise ValueError(f"{sample_path} holds {table.num_rows} records; the exports need 2")
    note = sampling_note(info)
    if info["size"] < info["of"]:
        log(f"the projector and the plots show {note} (--sample)")
    names = pc_names(spec.components)
    pcs = np.column_stack([table.column(c).to_numpy() for c in names])
    bundle = projector.write_projector(
        FileSystems.join(spec.folder, PROJECTOR_DIR), pcs,
        table.drop_columns(names), f"{spec.pooling} PCA-{spec.components}",
        f"beam-embed pca: {spec.model}, pooling {spec.pooling}\n{note}")

    method, why = drawn_method(spec.method, pcs)
    if why:
        log(why)
    coords = compute_map(method, pcs, spec.dims, spec.seed)
    colors = plots.coloring(table, spec.color_by)
    axes = axis_labels(method, spec.dims, variance_ratio)
    heading = f"{spec.model} · {spec.pooling} · {map_title(method, spec.components)}"
    fig = plots.scatter_figure(coords, table, colors,
                               f"{plots.escape(heading)}<br><sup>{plots.escape(note)}</sup>", axes)
    html, png = FileSystems.join(spec.folder, HTML_FILE), FileSystems.join(spec.folder, PNG_FILE)
    with naming_file(html):  # a full disk's error names no file
        plots.write_html(fig, html)
    with naming_file(png):
        plots.write_png(coords, colors, f"{heading}\n{note}", axes, png)
    return {"sample": PcaSample.from_json({**info, "note": note}),
            "projector": PcaProjector.from_json({k: f"{PROJECTOR_DIR}/{v}"
                                                 for k, v in bundle.items()}),
            "html": HTML_FILE, "png": PNG_FILE,
            "plot": PcaPlot(method=method, dims=spec.dims, color_by=spec.color_by)}
