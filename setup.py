"""beam-embed: a TensorFlow + Apache Beam batch embedding job.

`pip install -e .[dev]` on a workstation; `--setup_file ./setup.py` ships `pipeline` and
`models` to Dataflow workers with the runtime requirements pinned below.
"""

import setuptools

RUNTIME = [
    "tensorflow==2.21.0",
    "tensorflow-text==2.21.1",
    "tensorflow-hub==0.16.1",
    "tf-keras==2.21.0",
    "apache-beam[gcp]==2.77.0",
    "numpy==2.4.6",
    "pyarrow==25.0.1",
    "pyyaml==6.0.4",
    "pysbd==0.3.4",
    "scikit-learn==1.9.1",
    "threadpoolctl==3.8.0",
]  # exact pins: workers install these (docker/requirements.txt repeats them; a test checks)
EXPORT = ["keras-hub==0.32.0", "safetensors>=0.4"]  # export-model only; never on workers
VIZ = ["plotly>=6", "matplotlib>=3.8"]  # beam-embed pca's HTML/PNG exports, on the launcher
DEV = ["pytest>=8", "tokenizers>=0.20", "pandas>=2", "duckdb>=1.1", "tensorboard>=2.20", "scipy>=1.11",
       "ruff==0.17.6", "import-linter==2.17"]

setuptools.setup(
    name="beam-embed",
    version="0.1.0",
    description="Batch text embeddings with TF-Hub encoders on Apache Beam",
    python_requires=">=3.11",
    packages=setuptools.find_packages(include=["pipeline", "pipeline.*", "models", "models.*"]),
    install_requires=RUNTIME,
    extras_require={"export": EXPORT, "viz": VIZ, "dev": EXPORT + VIZ + DEV},
    data_files=[("share/beam-embed", ["configs/models.yaml"])],  # presets for plain installs
    entry_points={"console_scripts": ["beam-embed=pipeline.cli:main"]},
)
