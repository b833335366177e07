"""The sample as pictures: a self-contained interactive HTML scatter (plotly, its JavaScript
embedded, no network needed) and a static PNG of the same plot (matplotlib).

Every string that reaches the HTML (ids, texts, metadata, the model name) is HTML-escaped first:
plotly draws hover labels and titles from its own small HTML dialect, so an escaped `<script>`
shows as text and never runs. Up to WEBGL_ABOVE points a 2-D plot is SVG; above, WebGL.
"""

from __future__ import annotations

import html
import io
import textwrap
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from apache_beam.io.filesystems import FileSystems

MAX_CATEGORIES = 10  # the 9 most frequent values get their own colour; the rest are OTHER
OTHER, OTHER_COLOR = "(other)", "#c7c7c7"
HOVER_CHARS, HOVER_WIDTH = 300, 80
WEBGL_ABOVE = 5000


def escape(text: str) -> str:
    """&, < and > as entities: what plotly's label dialect decodes back (it leaves &quot;)."""
    return html.escape(text, quote=False)


@dataclass(frozen=True, eq=False)
class Coloring:
    """What the points are coloured by: numbers (a colour scale) or categories (a legend)."""
    label: str
    values: np.ndarray
    categories: tuple[str, ...]  # empty for numbers; most frequent first

    @property
    def categorical(self) -> bool:
        return bool(self.categories)

    def colors(self) -> dict[str, str]:
        """category -> hex colour, the same in the HTML and the PNG: the most frequent first,
        through PALETTE; OTHER light grey."""
        named = [c for c in self.categories if c != OTHER]
        return {**dict(zip(named, palette())), **({OTHER: OTHER_COLOR} if OTHER in
                                                     self.categories else {})}


def palette() -> list[str]:
    """Matplotlib's tab10 (Tableau's ten distinct hues, also plotly's D3) without its grey,
    which OTHER uses: nine colours no two of which are shades of one hue."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    tab10 = [to_hex(c) for c in colormaps["tab10"].colors]
    return [c for c in tab10 if c != "#7f7f7f"]


def coloring(table: pa.Table, color_by: str) -> Coloring:
    """`color_by` is a column of `table`, or "length" (the record's number of tokens)."""
    column = "num_tokens" if color_by == "length" else color_by
    label = "length (tokens)" if color_by == "length" else color_by
    values = table.column(column)
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return Coloring(label, values.to_numpy().astype(np.float64), ())
    values = np.array(pc.cast(values, pa.string()).fill_null("(none)").to_pylist(), object)
    names, counts = np.unique(values, return_counts=True)
    names = names[np.argsort(-counts, kind="stable")]
    if len(names) >= MAX_CATEGORIES:  # one colour per value up to 9 values
        names = names[:MAX_CATEGORIES - 1]
        values = np.where(np.isin(values, names), values, OTHER)
        names = np.append(names, OTHER)
    return Coloring(label, values, tuple(names))


def hover_texts(table: pa.Table, colors: Coloring) -> list[str]:
    """One escaped hover label per point: id, source, the colour value, the wrapped text."""
    n = table.num_rows
    texts = (table.column("text").to_pylist() if "text" in table.column_names else [""] * n)
    ids, sources = table.column("id").to_pylist(), table.column("source").to_pylist()
    labels = []
    for i in range(n):
        lines = [ids[i], f"source: {sources[i] or ''}"]
        if colors.label != "source":
            value = colors.values[i]
            lines.append(f"{colors.label}: {value:g}" if isinstance(value, float)
                         else f"{colors.label}: {value}")
        lines += textwrap.wrap((texts[i] or "")[:HOVER_CHARS], HOVER_WIDTH)
        lines = [escape(line) for line in lines]
        labels.append("<br>".join([f"<b>{lines[0]}</b>"] + lines[1:]))
    return labels


def scatter_figure(coords: np.ndarray, table: pa.Table, colors: Coloring, title: str,
                   axes: list[str]):
    """A plotly Figure: one trace per category, or one trace on a colour scale."""
    import plotly.graph_objects as go

    dims = coords.shape[1]
    hover = np.array(hover_texts(table, colors), object)
    if dims == 3:
        trace_type = go.Scatter3d
    else:
        trace_type = go.Scattergl if len(coords) > WEBGL_ABOVE else go.Scatter
    groups = ([(c, colors.values == c) for c in colors.categories] if colors.categorical
              else [(None, np.ones(len(coords), bool))])
    by_name = colors.colors()
    traces = []
    for name, mask in groups:
        marker = {"size": 4 if dims == 3 else 6, "opacity": 0.8}
        if colors.categorical:
            marker["color"] = by_name[name]
        else:
            marker.update(color=colors.values, colorscale="Viridis", showscale=True,
                          colorbar={"title": {"text": escape(colors.label)}})
        xyz = dict(zip("xyz", coords[mask].T))
        traces.append(trace_type(
            **xyz, mode="markers", marker=marker, hovertext=hover[mask].tolist(),
            hoverinfo="text", name=escape(name) if name else None,
            showlegend=name is not None))
    fig = go.Figure(traces)
    axis_titles = {f"{a}axis": {"title": {"text": t}} for a, t in zip("xyz", axes)}
    fig.update_layout(title={"text": title}, template="plotly_white",
                      legend={"title": {"text": escape(colors.label)}, "itemsizing": "constant"},
                      hoverlabel={"align": "left"},
                      **({"scene": axis_titles} if dims == 3 else axis_titles))
    return fig


def write_html(fig, path: str) -> None:
    """One HTML file with plotly.js inlined: opens offline, from any folder."""
    page = fig.to_html(include_plotlyjs=True, include_mathjax=False, full_html=True,
                       config={"displaylogo": False})
    with FileSystems.create(path) as f:
        f.write(page.encode("utf-8"))


def write_png(coords: np.ndarray, colors: Coloring, title: str, axes: list[str],
              path: str) -> None:
    """The same scatter, drawn by matplotlib (no browser needed)."""
    buf = io.BytesIO()
    draw_png(coords, colors, title, axes, buf)
    with FileSystems.create(path) as f:
        f.write(buf.getvalue())


def draw_png(coords: np.ndarray, colors: Coloring, title: str, axes: list[str], out) -> None:
    """write_png's picture, into a binary file object."""
    from matplotlib.figure import Figure

    dims = coords.shape[1]
    fig = Figure(figsize=(10, 8), dpi=110, layout="tight")
    ax = fig.add_subplot(projection="3d" if dims == 3 else None)
    if colors.categorical:
        for name, color in colors.colors().items():
            ax.scatter(*coords[colors.values == name].T, s=6, color=color, label=name)
        ax.legend(title=colors.label, fontsize="small", markerscale=2)
    else:
        points = ax.scatter(*coords.T, s=6, c=colors.values, cmap="viridis")
        fig.colorbar(points, ax=ax, label=colors.label)
    ax.set_title(title.replace("$", r"\$"))
    for setter, label in zip((ax.set_xlabel, ax.set_ylabel, getattr(ax, "set_zlabel", None)),
                             axes):
        setter(label)
    fig.savefig(out, format="png")
