"""Exact PCA in one distributed pass: float64 moments summed by a CombineFn, then `eigh`.

Each worker accumulates count, sum and the sum of outer products of the vectors it reads
(O(width²) memory, whatever the number of rows); Beam merges the accumulators; the driver-side
step turns the merged moments into the covariance and eigendecomposes it. Components follow
scikit-learn's sign convention (`svd_flip(u_based_decision=False)`: the largest-magnitude entry of
each component is positive), so a fit compares with `sklearn.decomposition.PCA` directly.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn
from beam_embed.pipeline.pca.inputs import vectors_of
from beam_embed.process.blas import blas_threads

CHUNK_ROWS = 8192  # rows summed in float32 at a time: bounds its rounding and the temporaries
MOMENT_THREADS = 1  # BLAS threads for the moments' rank-k updates (see Moments)
FIT_VERSION = 1


@dataclass(frozen=True)
class FitSpec:
    """What to fit: the pooling column, K, and where the vectors came from."""
    pooling: PoolingColumn
    components: int
    center: bool = True
    whiten: bool = False
    source: str = ""  # the embedding manifest the fit was made from
    model: dict = field(default_factory=dict)


class Moments:
    """Count, sum and sum of outer products (float64) of the vectors added so far.

    Each chunk's outer products are summed in float32 BLAS (twice the float64 rate: measured
    70 vs 35 GFLOP/s on one AVX2 core) about the chunk's own mean, then moved back to the
    origin in float64: the float32 rounding is relative to the vectors' spread, not to their
    mean, so it stays at the float32 vectors' own precision. BLAS runs on one thread: the next
    row groups are decoded on another (prefetched), and on 2 cores one BLAS thread
    beside that reader was faster than two (fit pass of 1M x 384: 3.3-3.8 s vs 4.3 s, two runs
    each); more threads also oversubscribe the cores when a Beam runner starts a worker per core,
    and OpenBLAS's spinning threads took the cores from the decoding (measured earlier on a busy
    AVX2 machine: 2x slower with two threads throughout)."""

    def __init__(self, width: int):
        self.count = 0
        self.total = np.zeros(width)
        self.outer = np.zeros((width, width))

    def add(self, vectors: np.ndarray) -> Moments:
        with blas_threads(MOMENT_THREADS):
            for start in range(0, len(vectors), CHUNK_ROWS):
                chunk = np.asarray(vectors[start:start + CHUNK_ROWS], np.float32)
                sums = chunk.sum(axis=0, dtype=np.float64)
                shift = (sums / len(chunk)).astype(np.float32)
                centred = chunk - shift
                # sum(x x') = sum(c c') + s t' + t s' - n s s'  (c = x - s, t = sum(x))
                shift64 = shift.astype(np.float64)
                cross = np.outer(shift64, sums)
                self.outer += (centred.T @ centred).astype(np.float64)  # numpy: syrk
                self.outer += cross + cross.T - len(chunk) * np.outer(shift64, shift64)
                self.total += sums
        self.count += len(vectors)
        return self

    def merge(self, other: Moments) -> Moments:
        self.count += other.count
        self.total += other.total
        self.outer += other.outer
        return self

    @property
    def scatter(self) -> np.ndarray:
        """The symmetric sum of outer products."""
        return self.outer


class MomentsCombineFn(beam.CombineFn):
    """Blocks (pa.Table) -> the Moments of their `column` vectors."""

    def __init__(self, pooling: PoolingColumn):
        super().__init__()
        self.pooling = pooling

    def create_accumulator(self) -> Moments:
        return Moments(self.pooling.width)

    def add_input(self, acc: Moments, block) -> Moments:
        return acc.add(vectors_of(block, self.pooling))

    def merge_accumulators(self, accs) -> Moments:
        accs = iter(accs)
        merged = next(accs)
        for acc in accs:
            merged.merge(acc)
        return merged

    def extract_output(self, acc: Moments) -> Moments:
        return acc


@dataclass(frozen=True, eq=False)
class PcaFit:
    """A fitted PCA: `transform` maps [rows, width] vectors to [rows, K] coordinates."""
    spec: FitSpec
    count: int
    mean: np.ndarray  # [width], the data mean (subtracted only when spec.center)
    components: np.ndarray  # [K, width], orthonormal rows
    explained_variance: np.ndarray  # [K], the variance (ddof=1) of each coordinate
    explained_variance_ratio: np.ndarray  # [K], over the total variance of the data
    singular_values: np.ndarray  # [K]

    @property
    def width(self) -> int:
        return self.components.shape[1]

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        """float32 [rows, K] coordinates, CHUNK_ROWS rows at a time: float32 BLAS (the stored
        projections are float32), the whitening folded into the components. The mean is
        subtracted before the product (exact to float32 rounding of the difference, however far
        the data sit from the origin), into one buffer reused for every chunk."""
        axes = self.components.T
        if self.spec.whiten:  # unit variance per coordinate; sklearn's floor for null axes
            axes = axes / np.maximum(np.sqrt(self.explained_variance), np.finfo(np.float64).eps)
        axes, mean = axes.astype(np.float32), self.mean.astype(np.float32)
        out = np.empty((len(vectors), len(self.components)), np.float32)
        buffer = np.empty((min(CHUNK_ROWS, len(vectors)), self.width), np.float32)
        with blas_threads(1):
            for start in range(0, len(vectors), CHUNK_ROWS):
                chunk = np.asarray(vectors[start:start + CHUNK_ROWS], np.float32)
                if self.spec.center:
                    chunk = np.subtract(chunk, mean, out=buffer[:len(chunk)])
                np.matmul(chunk, axes, out=out[start:start + len(chunk)])
        return out

    def summary(self) -> dict:
        """JSON-ready description, for manifests and logs."""
        return {"pooling": self.spec.pooling.name, "column": self.spec.pooling.column,
                "width": self.width, "components": len(self.components), "count": self.count,
                "center": self.spec.center, "whiten": self.spec.whiten,
                "source": self.spec.source, "model": self.spec.model,
                "explained_variance_ratio": [round(float(r), 6)
                                             for r in self.explained_variance_ratio]}


def fit_pca(moments: Moments, spec: FitSpec) -> PcaFit:
    """Moments -> the top `spec.components` principal axes (eigh of the covariance)."""
    n, k = moments.count, spec.components
    if n < max(2, k):  # the job checks the manifest's count first; this is what was read
        fewer = f" (pass --components {n} or fewer)" if n >= 2 else ""
        raise ValueError(f"PCA with {k} components needs at least {max(2, k)} vectors in "
                         f"column {spec.pooling.column!r}; got {n}{fewer}")
    mean = moments.total / n
    cov = (moments.scatter - n * np.outer(mean, mean)) / (n - 1)
    decomposed = cov if spec.center else moments.scatter / (n - 1)
    evals, evecs = np.linalg.eigh(decomposed)
    evals = np.maximum(evals[::-1][:k], 0.0)
    components = evecs[:, ::-1][:, :k].T.copy()
    pivots = np.abs(components).argmax(axis=1)
    components *= np.sign(components[np.arange(k), pivots])[:, None]
    if spec.center:
        variance = evals
    else:  # variance of the coordinates about their own mean
        variance = np.einsum("kw,wv,kv->k", components, cov, components)
    return PcaFit(spec=spec, count=n, mean=mean, components=components,
                  explained_variance=variance, explained_variance_ratio=variance / np.trace(cov),
                  singular_values=np.sqrt(evals * (n - 1)))


class FitPca(beam.PTransform):
    """PCollection[pa.Table] -> a single PcaFit."""

    def __init__(self, spec: FitSpec):
        super().__init__()
        self.spec = spec

    def expand(self, blocks):
        return (blocks
                | "SumMoments" >> beam.CombineGlobally(MomentsCombineFn(self.spec.pooling))
                | "Eigendecompose" >> beam.Map(fit_pca, self.spec))


_ARRAYS = ("mean", "components", "explained_variance", "explained_variance_ratio",
           "singular_values")


def save_fit(fit: PcaFit, path: str) -> str:
    """Writes `fit` as an .npz (arrays + a JSON `meta` string) to any Beam filesystem path."""
    meta = {"fit_version": FIT_VERSION, "count": fit.count, **asdict(fit.spec)}
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(json.dumps(meta)), **{a: getattr(fit, a) for a in _ARRAYS})
    with FileSystems.create(path) as f:
        f.write(buf.getvalue())
    return path


def load_fit(path: str) -> PcaFit:
    """Reads a fit written by `save_fit`."""
    if not FileSystems.exists(path):
        raise FileNotFoundError(f"no saved PCA fit at {path!r}")
    with FileSystems.open(path) as f:
        data = np.load(io.BytesIO(f.read()), allow_pickle=False)
    meta = json.loads(str(data["meta"]))
    if meta.pop("fit_version") != FIT_VERSION:
        raise ValueError(f"{path}: unsupported fit_version; expected {FIT_VERSION}")
    count = meta.pop("count")
    spec = FitSpec(**{**meta, "pooling": PoolingColumn(**meta["pooling"])})
    return PcaFit(spec=spec, count=count, **{a: data[a] for a in _ARRAYS})
