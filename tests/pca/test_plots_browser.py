"""The HTML export in a real browser (Debian's headless chromium): it renders every sampled point
with no network, and corpus text carrying markup shows as text and never runs."""

import json
import re

import numpy as np
import pyarrow as pa
import pytest

from beam_embed.pipeline.pca.exports import ExportSpec, export_sample
from beam_embed.pipeline.pca.sample import Sample, write_sample
from tests.pca.fixtures import chromium_dom, clustered_matrix

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

PLANTED = ("PLANTED <script>window.__pwned = 1; document.title = 'pwned';</script>"
           "<img src=x onerror=\"window.__pwned = 2; document.body.dataset.pwned = 'yes'\">"
           "<b>not bold</b> & co")

# Appended to a copy of the page: waits for plotly, hovers the planted point, reports in the DOM.
PROBE = """<script>
(function () {
  function probe(attempt) {
    var gd = document.querySelector(".js-plotly-plot");
    var points = document.querySelectorAll(".scatterlayer .point").length;
    if ((!gd || points === 0) && attempt < 100) {
      setTimeout(function () { probe(attempt + 1); }, 100);
      return;
    }
    var target = null, hover = null;
    gd.data.forEach(function (trace, c) {
      (trace.hovertext || []).forEach(function (h, p) {
        if (h.indexOf("PLANTED") >= 0) target = {curveNumber: c, pointNumber: p};
      });
    });
    try {
      Plotly.Fx.hover(gd, [target]);
      var label = document.querySelector(".hoverlayer .hovertext");
      hover = label ? label.textContent : null;
    } catch (e) { hover = "error: " + e; }
    var out = document.createElement("pre");
    out.id = "probe";
    out.textContent = JSON.stringify({points: points, hover: hover, title: document.title,
                                      pwned: window.__pwned || null,
                                      marker: document.body.dataset.pwned || null});
    document.body.appendChild(out);
  }
  window.addEventListener("load", function () { probe(0); });
})();
</script>
"""


def test_page_renders_every_point_and_markup_stays_text(tmp_path):
    x, labels = clustered_matrix(150, width=4)
    texts = [f"sentence {i}" for i in range(150)]
    texts[17] = PLANTED
    table = pa.table({"id": [f"r{i}" for i in range(150)], "pc_1": x[:, 0], "pc_2": x[:, 1],
                      "text": texts, "source": [f"s{t}" for t in labels],
                      "num_tokens": pa.array(np.arange(150), pa.int32())})
    sample = write_sample(Sample(table, 1000), str(tmp_path / "sample.parquet"), seed=0)
    export_sample(sample, ExportSpec(str(tmp_path), 2, "<b>model</b>", "mean", "pca", 2,
                                     "source", 0))

    page = (tmp_path / "plot.html").read_text()
    assert not re.search(r"<script[^>]*\bsrc=", page)  # plotly.js is inline: no network
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))
    found = re.search(r'<pre id="probe">(.*?)</pre>', chromium_dom(str(probed)), re.S)
    assert found, "the probe did not report: the page did not load or plotly did not draw"
    result = json.loads(found.group(1).replace("&lt;", "<").replace("&gt;", ">")
                        .replace("&quot;", '"').replace("&amp;", "&"))

    assert result["points"] == 150
    assert result["pwned"] is None and result["marker"] is None
    assert result["title"] != "pwned"
    # the whole text, as typed (the label wraps it over several lines)
    assert re.sub(r"\s", "", PLANTED) in re.sub(r"\s", "", result["hover"])
