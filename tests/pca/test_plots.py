"""The plot builders: colouring, hover labels, trace kinds and point counts, the PNG."""

import html
import io

import numpy as np
import pyarrow as pa
from PIL import Image

from beam_embed.pipeline.pca import plots
from tests.pca.fixtures import clustered_matrix


def _table(n, categories=3):
    return pa.table({"id": [f"r{i}" for i in range(n)],
                     "text": [f"a <b>tag</b> & words {i} " * 8 for i in range(n)],
                     "source": [f"s{i % categories}" for i in range(n)],
                     "num_tokens": pa.array(np.arange(n) + 1, pa.int32())})


def _points(fig) -> int:
    return sum(len(trace.x) for trace in fig.data)


def test_many_categories_keep_the_most_frequent_and_group_the_rest():
    table = pa.table({"source": [f"s{i}" for i in range(30)] * 2 + ["s29"] * 5})
    colors = plots.coloring(table, "source")
    assert colors.categorical and len(colors.categories) == plots.MAX_CATEGORIES
    assert colors.categories[0] == "s29" and colors.categories[-1] == plots.OTHER
    assert (colors.values == plots.OTHER).sum() == 2 * (30 - plots.MAX_CATEGORIES + 1)


def test_length_colours_on_a_scale():
    colors = plots.coloring(_table(4), "length")
    assert not colors.categorical and colors.label == "length (tokens)"
    np.testing.assert_array_equal(colors.values, [1, 2, 3, 4])


def test_hover_labels_escape_markup_and_wrap():
    (label,) = plots.hover_texts(_table(1), plots.coloring(_table(1), "length"))
    assert label.startswith("<b>r0</b><br>source: s0<br>length (tokens): 1<br>a &lt;b&gt;tag")
    assert "<b>tag" not in label and "&amp; words" in label
    assert all(len(html.unescape(line)) <= plots.HOVER_WIDTH for line in label.split("<br>"))


def test_figures_hold_every_point_in_the_right_trace_kind():
    x, _ = clustered_matrix(plots.WEBGL_ABOVE + 1, width=3)
    big, small = _table(len(x)), _table(40)
    flat = plots.scatter_figure(x[:40, :2], small, plots.coloring(small, "source"), "t", ["a", "b"])
    assert {t.type for t in flat.data} == {"scatter"} and _points(flat) == 40
    assert [t.name for t in flat.data] == ["s0", "s1", "s2"]
    gl = plots.scatter_figure(x[:, :2], big, plots.coloring(big, "length"), "t", ["a", "b"])
    assert [t.type for t in gl.data] == ["scattergl"] and _points(gl) == len(x)
    cube = plots.scatter_figure(x[:40], small, plots.coloring(small, "source"), "t",
                                ["a", "b", "c"])
    assert {t.type for t in cube.data} == {"scatter3d"} and _points(cube) == 40
    assert cube.layout.scene.zaxis.title.text == "c"


def test_png_is_a_picture_of_the_points(tmp_path):
    x, _ = clustered_matrix(200, width=3)
    for dims, colour_by in ((2, "source"), (3, "length")):
        path = tmp_path / f"plot{dims}.png"
        plots.write_png(x[:, :dims], plots.coloring(_table(200), colour_by), "m · $x$ · PCA",
                        ["PC1", "PC2", "PC3"][:dims], str(path))
        image = Image.open(io.BytesIO(path.read_bytes())).convert("RGB")
        assert image.size == (1100, 880)
        pixels = np.asarray(image).reshape(-1, 3).astype(int)
        coloured = (pixels.max(axis=1) - pixels.min(axis=1)) > 60  # not white, grey or black
        assert coloured.sum() > 500


def test_one_palette_for_html_and_png(tmp_path):
    table = _table(300, categories=12)  # 12 values: 9 colours, then OTHER
    colors = plots.coloring(table, "source")
    by_name = colors.colors()
    assert list(by_name) == list(colors.categories) and by_name[plots.OTHER] == plots.OTHER_COLOR
    named = [c for c in colors.categories if c != plots.OTHER]
    assert len(named) == plots.MAX_CATEGORIES - 1 and len(set(by_name.values())) == len(by_name)
    x, _ = clustered_matrix(300, width=2)
    fig = plots.scatter_figure(x, table, colors, "t", ["a", "b"])
    assert {t.name: t.marker.color for t in fig.data} == by_name  # the HTML's colours

    path = tmp_path / "plot.png"
    plots.write_png(x, colors, "t", ["a", "b"], str(path))
    pixels = {tuple(p) for p in np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3)}
    for colour in by_name.values():  # each drawn in the PNG exactly as in the HTML
        assert tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5)) in pixels, colour


def test_palette_colours_are_far_apart():
    rgb = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in plots.palette()], float)
    gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=2)[np.triu_indices(len(rgb), 1)]
    assert len(rgb) == plots.MAX_CATEGORIES - 1 and gaps.min() > 70  # tab20 shade pairs: 46
    grey = np.array([int(plots.OTHER_COLOR[i:i + 2], 16) for i in (1, 3, 5)], float)
    assert np.linalg.norm(rgb - grey, axis=1).min() > 70


def test_the_warm_up_draws_both_pictures_and_only_logs_a_failure(monkeypatch, caplog):
    import logging

    from beam_embed.pipeline.pca import exports

    drawn = []
    real_png = plots.draw_png

    def png(*args):
        real_png(*args)
        drawn.append(Image.open(io.BytesIO(args[-1].getvalue())).size)

    monkeypatch.setattr(plots, "draw_png", png)
    exports.start_warm_up().join(timeout=60)
    assert drawn and drawn[0][0] > 100  # a real PNG came out of the thread

    def broken(*args, **kwargs):
        raise RuntimeError("no plotly here")

    monkeypatch.setattr(plots, "scatter_figure", broken)
    with caplog.at_level(logging.DEBUG, logger=exports.__name__):
        thread = exports.start_warm_up()
        thread.join(timeout=60)
    assert not thread.is_alive() and "no plotly here" in caplog.text
