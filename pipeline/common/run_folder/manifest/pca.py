"""`beam-embed pca`'s manifest.json (PcaManifest) and its typed entries: the embedding run
read, the fit, the projections, the sample, the projector bundle and the plots.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from beam_embed.pipeline.common.run_folder.manifest.entries import Entry, ModelEntry, later
from beam_embed.pipeline.common.run_folder.manifest.folder import write_json

PCA_MANIFEST_VERSION = 1  # `beam-embed pca`'s manifest.json (PcaManifest, "kind": "pca")


@dataclass(frozen=True)
class PcaInput(Entry):
    """The embedding run a pca job read: its folder, the format read, its model."""
    folder: str = ""
    format: str = ""
    model: ModelEntry = ModelEntry()

    @classmethod
    def _read_value(cls, key: str, value):
        return ModelEntry.from_json(value) if key == "model" else super()._read_value(key, value)


@dataclass(frozen=True)
class PcaFitEntry(Entry):
    """The fit's file, whether it was reused (--fit), and its summary (pca.fit.PcaFit.summary)."""
    file: str = ""
    reused: bool = False
    pooling: str | None = later()
    column: str | None = later()
    width: int | None = later()
    components: int | None = later()
    count: int | None = later()  # the vectors the fit was made from
    center: bool | None = later()
    whiten: bool | None = later()
    source: str | None = later()  # the embedding manifest the fit was made from
    model: ModelEntry | None = later()  # that run's model
    explained_variance_ratio: tuple[float, ...] | None = later()

    @classmethod
    def _read_value(cls, key: str, value):
        if key == "model" and isinstance(value, dict):
            return ModelEntry.from_json(value)
        return super()._read_value(key, value)


@dataclass(frozen=True)
class PcaProjections(Entry):
    """The projection shards, the records projected, their columns."""
    files: tuple[str, ...] = ()
    rows: int = 0
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class PcaSample(Entry):
    """The sample the projector and the plots show (pca.sample): `size` of `of` records."""
    size: int = 0
    of: int = 0
    seed: int | None = later()
    method: str | None = later()
    text_chars: int | None = later()
    note: str | None = later()  # in words, as the plots' captions say it


@dataclass(frozen=True)
class PcaProjector(Entry):
    """The projector bundle's files by role, relative to the output folder."""
    tensors: str | None = later()
    metadata: str | None = later()
    config: str | None = later()


@dataclass(frozen=True)
class PcaPlot(Entry):
    """What the plots map: the method, its dimensions, the column coloring them (or none)."""
    method: str = "pca"
    dims: int = 2
    color_by: str | None = None


# The pca manifest's keys read into the typed entries above.
_PCA_ENTRIES = {"input": PcaInput, "fit": PcaFitEntry, "projections": PcaProjections,
                "sample": PcaSample, "projector": PcaProjector, "plot": PcaPlot}


@dataclass(frozen=True)
class PcaManifest:
    """`beam-embed pca`'s manifest.json: the only code that writes it.

    Its keys, in the order written: format_version, kind ("pca"), input, fit, projections,
    sample_file, sample, projector, html, png, plot (the last five: pca.exports). The entries
    are typed (PcaInput, PcaFitEntry, PcaProjections, PcaSample, PcaProjector, PcaPlot) and
    write back the keys they read."""

    input: PcaInput
    fit: PcaFitEntry
    projections: PcaProjections
    sample_file: str
    sample: PcaSample
    projector: PcaProjector
    html: str
    png: str
    plot: PcaPlot
    format_version: int = PCA_MANIFEST_VERSION
    KIND: ClassVar[str] = "pca"

    def to_json(self) -> dict:
        return {"format_version": self.format_version, "kind": self.KIND,
                "input": self.input.to_json(), "fit": self.fit.to_json(),
                "projections": self.projections.to_json(), "sample_file": self.sample_file,
                "sample": self.sample.to_json(), "projector": self.projector.to_json(),
                "html": self.html, "png": self.png, "plot": self.plot.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> PcaManifest:
        keys = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: _PCA_ENTRIES[k].from_json(v) if k in _PCA_ENTRIES else v
                      for k, v in data.items() if k in keys})

    def write(self, folder: str) -> None:
        write_json(folder, self.to_json())

    @classmethod
    def recognizes(cls, data: dict) -> bool:
        return data.get("kind") == cls.KIND

    @staticmethod
    def listed_in(data: dict) -> list[str]:
        """The files a manifest's JSON lists, relative to its folder (the manifest aside), read
        leniently."""
        fit, projections = data.get("fit") or {}, data.get("projections") or {}
        named = [fit.get("file"), data.get("sample_file"), data.get("html"), data.get("png"),
                 *(data.get("projector") or {}).values(), *projections.get("files", [])]
        return [n for n in named if n]
