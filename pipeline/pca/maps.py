"""2-D/3-D maps of the sample for the plots: the leading PCs, or a non-linear map of all K PCs
(PCA to K, then t-SNE or UMAP, as the ELMo notebook did), on the bounded sample only."""

from __future__ import annotations

import importlib.util

import numpy as np

from beam_embed.process.versions import install_command


def _pca(coords: np.ndarray, dims: int, seed: int) -> np.ndarray:
    return coords[:, :dims]


def _tsne(coords: np.ndarray, dims: int, seed: int) -> np.ndarray:
    from sklearn.manifold import TSNE

    perplexity = min(30.0, (len(coords) - 1) / 3)
    return TSNE(n_components=dims, perplexity=perplexity, init="pca",
                random_state=seed).fit_transform(coords)


def _umap(coords: np.ndarray, dims: int, seed: int) -> np.ndarray:
    import umap

    return umap.UMAP(n_components=dims, random_state=seed).fit_transform(coords)


# name -> (map function, axis label prefix, title, extra package or None)
MAPS = {
    "pca": (_pca, "PC", "PCA", None),
    "tsne": (_tsne, "t-SNE ", "t-SNE of {k} PCs", None),
    "umap": (_umap, "UMAP ", "UMAP of {k} PCs", "umap"),
}


def check_method(method: str, components: int, dims: int) -> None:
    """Fails on a map that cannot run here, naming the choices."""
    if method not in MAPS:
        raise ValueError(f"unknown method {method!r}; expected one of {sorted(MAPS)}")
    package = MAPS[method][3]
    if package and importlib.util.find_spec(package) is None:
        usable = sorted(m for m, spec in MAPS.items()
                        if not spec[3] or importlib.util.find_spec(spec[3]))
        raise ValueError(f"method {method!r} needs umap-learn, which the base install leaves "
                         f"out: {install_command('umap')}; usable here: {usable}")
    if components < dims:
        raise ValueError(f"--dims {dims} needs at least {dims} components; got {components}")


# What the HTML and PNG plots are drawn with (base requirements): checked with the options, so a
# broken install fails before any output is written rather than after the fit.
PLOT_PACKAGES = {"plotly": "plotly", "matplotlib": "matplotlib"}


def check_plot_packages() -> None:
    missing = [dist for module, dist in PLOT_PACKAGES.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        raise ValueError(f"the plots need {' and '.join(missing)}, which beam-embed installs; "
                         f"this environment lacks them: reinstall with {install_command()}")


def without_spread(coords: np.ndarray) -> bool:
    """Whether the points are one point to float32's precision (all of the sample the same
    vector): a non-linear map has nothing to place them by, and t-SNE's start, scaled by the
    spread, divides by zero and crashed the process (exit 139)."""
    if len(coords) == 0:
        return True
    scale = max(1.0, float(np.abs(coords).max()))
    return float(np.ptp(coords, axis=0).max()) <= 4 * np.finfo(np.float32).eps * scale


def drawn_method(method: str, coords: np.ndarray) -> tuple[str, str | None]:
    """(the map the plots draw, a line saying why it is not `method`, or None): a non-linear
    map of points without spread is drawn as the PCA map, which shows them as they are."""
    if method == "pca" or not without_spread(coords):
        return method, None
    return "pca", (f"warning: the {len(coords):,} sampled points are all the same vector, which "
                   f"{MAPS[method][1].strip()} cannot map; the plots show the leading "
                   "PCs instead")


def compute_map(method: str, coords: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """[n, K] PCA coordinates -> [n, dims] plot coordinates."""
    return np.asarray(MAPS[method][0](coords, dims, seed), np.float64)


def axis_labels(method: str, dims: int, variance_ratio=None) -> list[str]:
    """"PC1 (31.2% of variance)" for PCA axes when the ratios are known; "t-SNE 1" otherwise
    (a non-linear map's axes have no variance share)."""
    names = [f"{MAPS[method][1]}{i}" for i in range(1, dims + 1)]
    if method != "pca" or variance_ratio is None:
        return names
    return [f"{name} ({ratio:.1%} of variance)" for name, ratio in zip(names, variance_ratio)]


def map_title(method: str, components: int) -> str:
    return MAPS[method][2].format(k=components)
