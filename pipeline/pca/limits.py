"""The numbers the PCA job's flags default to and are checked against, and the checks that need
only numbers (the manifest's width and record count, the flags), in a module that imports
nothing: `beam-embed pca --help` shows them without loading Beam."""

DEFAULT_COMPONENTS, DEFAULT_SAMPLE = 50, 10_000
PROJECTOR_LIMIT = 100_000  # the most points the TensorBoard projector loads
# A fit needs two vectors (the variance divides by count - 1), and the exports draw at least two
# points: a run of fewer records cannot be shown, with a saved fit or without.
MIN_RECORDS = MIN_SAMPLE = 2


def most_components(width: int, records: int | None) -> int:
    """The largest K: PCA finds at most one component per dimension of the vectors and one per
    record (the fit refuses fewer vectors than components). `records` None: not known."""
    return width if records is None else min(width, records)


def default_components(width: int, records: int | None) -> int:
    return min(DEFAULT_COMPONENTS, most_components(width, records))


def _of(column: str, width: int, records: int | None) -> str:
    counted = f" with {records:,} records" if records is not None and records < width else ""
    return f"column {column!r} of width {width}{counted}"


def check_records(records: int | None, manifest: str) -> None:
    if records is not None and records < MIN_RECORDS:
        raise ValueError(f"{manifest} counts {records} embedded record(s); PCA and its plots "
                         f"need at least {MIN_RECORDS}")


def check_components(k: int, column: str, width: int, records: int | None) -> None:
    """An explicit --components: 1..most_components."""
    most = most_components(width, records)
    if not 1 <= k <= most:
        raise ValueError(f"--components {k} is out of range for {_of(column, width, records)}; "
                         f"expected 1..{most}")


def check_dims(dims: int, k: int, column: str, width: int, records: int | None) -> None:
    """The default K (no --components, no --fit) against --dims: says why K is that small.
    Explicit and saved K are checked by maps.check_method."""
    if k < dims:
        raise ValueError(f"--dims {dims} needs at least {dims} components; "
                         f"{_of(column, width, records)} has at most {k}")


def check_sample(sample: int) -> None:
    if not MIN_SAMPLE <= sample <= PROJECTOR_LIMIT:
        raise ValueError(f"--sample {sample} is out of range; expected {MIN_SAMPLE}.."
                         f"{PROJECTOR_LIMIT} (the plots draw at least {MIN_SAMPLE} points; "
                         f"{PROJECTOR_LIMIT} is the TensorBoard projector's limit)")


def check_map_points(method: str, dims: int, sample: int, records: int | None) -> None:
    """t-SNE (initialized by PCA) and UMAP place the sample's points in `dims` dimensions and
    need at least `dims` points to do it (scikit-learn: n_components <= n_samples); the PCA
    map only reads the first `dims` coordinates."""
    points = sample if records is None else min(sample, records)
    if method != "pca" and points < dims:
        of = f"--sample {sample}" + (f" of {records} records" if records is not None else "")
        raise ValueError(f"--method {method} --dims {dims} needs at least {dims} points to map; "
                         f"the sample has {points} ({of})")
