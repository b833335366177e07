"""The project's Beam runner for dask.distributed clusters (runner.py: DaskRunner), used by the
Beam jobs (`run`, `pca`) with `--runner DaskRunner --dask_client_address tcp://HOST:PORT`: a
dask bag per PCollection (translate.py), each ParDo partition a bundle on a worker (bundles.py),
a worker's share of its machine's cores for the model's TensorFlow pools (cores.py), the
up-front look that every worker sees the output and the same model (probe.py), the launcher's
progress line from the workers' counts (progress.py). Every Beam internal it relies on goes
through beam_embed/process/private_apis/ (beam_runner.py, beam.py). Importing the package
imports nothing; its modules import Beam and dask."""
