"""`beam-embed run --dry-run --job-file`: the Dataflow job built offline from configs/, read back.

Every dry run here runs with the network refused (a recorded attempt fails the test), no
credentials reachable, and an alarm that turns a hang into a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import tarfile
from unittest import mock

import apache_beam as beam
import pytest
import yaml

import beam_embed.pipeline.job.dry_run as dataflow
from beam_embed.pipeline.job.command import main

pytestmark = pytest.mark.pipeline  # whole jobs and commands, end to end

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU_CONFIG = os.path.join(REPO, "configs", "dataflow_gpu.yaml")
CPU_CONFIG = os.path.join(REPO, "configs", "dataflow_cpu.yaml")
TPU_CONFIG = os.path.join(REPO, "configs", "dataflow_tpu.yaml")
DRY_RUN_LIMIT_S = 240


@contextlib.contextmanager
def offline(tmp, cwd=REPO):
    """Refuses (and records) every connection and DNS lookup; no credentials; alarm on hangs."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[1:3]))
        raise OSError("the network is off in this test")

    def hang(signum, frame):
        raise TimeoutError(f"dry run still running after {DRY_RUN_LIMIT_S}s: it waits on a service")

    env = {"GOOGLE_APPLICATION_CREDENTIALS": os.path.join(tmp, "no-credentials.json"),
           "CLOUDSDK_CONFIG": os.path.join(tmp, "no-gcloud")}
    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(DRY_RUN_LIMIT_S)
    try:
        with mock.patch.object(socket.socket, "connect", refuse), \
                mock.patch.object(socket, "getaddrinfo", refuse), \
                mock.patch.dict(os.environ, env), contextlib.chdir(cwd):
            yield attempts
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def dry_run(tmp, *args: str, cwd=REPO) -> tuple[int, dict | None, list[str]]:
    job_file = os.path.join(tmp, "job.json")
    with offline(tmp, cwd) as attempts:
        code = main([*args, "--dry-run", "--job-file", job_file])
    assert attempts == [], f"the dry run tried the network: {attempts}"
    if code != 0:
        return code, None, attempts
    with open(job_file, encoding="utf-8") as f:
        return code, json.load(f), attempts


@pytest.fixture(scope="module")
def gpu_job(tmp_path_factory):
    """configs/dataflow_gpu.yaml exactly as shipped (gs:// model, input, output)."""
    code, job, _ = dry_run(str(tmp_path_factory.mktemp("gpu_job")), "--config", GPU_CONFIG)
    assert code == 0
    return job


@pytest.fixture(scope="module")
def gpu_config():
    with open(GPU_CONFIG, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_every_step_of_the_job_is_described(gpu_job):
    names = {s["name"] for s in gpu_job["steps"]}
    for step in ("ReadCorpus", "EmbedRecords", "EmbedRecords/RunInference", "WriteShards",
                 "WriteDeadLetters", "WriteManifest", "WriteManifest/Write"):
        assert step in names
    assert gpu_job["submitted"] is False and gpu_job["runner"] == "DataflowRunner"
    assert all(s["urn"] for s in gpu_job["steps"])
    # bounded shards, committed as they close; a failed job is continued with --resume
    assert gpu_job["shards"]["bound_mb"] == 128 and "--resume" in gpu_job["shards"]["resume"]


def test_worker_environment_has_the_gpu_and_the_image(gpu_job, gpu_config):
    worker = gpu_job["worker"]
    assert worker["accelerator_parsed"] == {"type": "nvidia-l4", "count": "1",
                                            "install-nvidia-driver": True}
    assert gpu_config["dataflow_service_options"] in gpu_job["service_options"]
    assert worker["container_image"] == gpu_config["sdk_container_image"]
    pool = gpu_job["dataflow_job"]["environment"]["workerPools"][0]
    assert pool["workerHarnessContainerImage"] == gpu_config["sdk_container_image"]
    assert pool["machineType"] == "g2-standard-8" and worker["max_num_workers"] == 8
    assert "no_use_multiple_sdk_containers" in gpu_job["experiments"]
    assert "use_runner_v2" in gpu_job["experiments"]  # added by Beam's own runner code
    assert worker["sdk_processes"].startswith("one per worker VM")
    assert gpu_job["warnings"] == []


def test_the_tpu_config_describes_a_tpu_job_offline(tmp_path):
    """configs/dataflow_tpu.yaml as shipped, on a machine without a TPU: the dry run describes
    the TPU workers and the TPU path the job would take on them, and warns of nothing."""
    with open(TPU_CONFIG, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    code, job, _ = dry_run(str(tmp_path), "--config", TPU_CONFIG)
    assert code == 0 and job["runner"] == "DataflowRunner" and job["warnings"] == []
    worker = job["worker"]
    assert worker["machine_type"] == "ct5lp-hightpu-1t"
    assert worker["accelerator_parsed"] == {"type": "tpu-v5-lite-podslice", "topology": "1x1"}
    assert "worker_accelerator=type:tpu-v5-lite-podslice;topology:1x1" in job["service_options"]
    assert worker["sdk_processes"].startswith("one per worker VM")
    assert worker["container_image"] == config["sdk_container_image"]
    pool = job["dataflow_job"]["environment"]["workerPools"][0]
    assert pool["machineType"] == "ct5lp-hightpu-1t"
    assert pool["workerHarnessContainerImage"] == config["sdk_container_image"]
    model = job["model"]
    assert (model["accelerator"], model["precision"]) == ("tpu", "bf16")
    # batch_tokens 32768, max_batch_size 512, max_seq_length 256: one shape per bucket
    assert model["fixed_shapes"][0] == [512, 8] and model["fixed_shapes"][-1] == [128, 256]
    assert all(rows * length <= 32768 for rows, length in model["fixed_shapes"])
    # what the workers are told: the job's own flags travel in the pipeline options
    options = job["dataflow_job"]["environment"]["sdkPipelineOptions"]["options"]
    assert options.get("accelerator") == "tpu"


def test_a_tpu_and_the_tpu_path_go_together_or_are_warned_of():
    from apache_beam.options.pipeline_options import PipelineOptions

    from beam_embed.pipeline.job.dataflow.checks import launch_warnings

    def warnings(service_option, accelerator):
        options = PipelineOptions([
            "--setup_file", "setup.py", "--sdk_container_image", "image",
            "--experiments", "no_use_multiple_sdk_containers",
            "--dataflow_service_options", f"worker_accelerator={service_option}"])
        return launch_warnings(options, "gs://m", "gs://o", ["gs://i"], accelerator)

    tpu = "type:tpu-v5-lite-podslice;topology:1x1"
    assert warnings(tpu, "tpu") == []  # and no NVIDIA driver asked of a TPU
    assert ["--accelerator tpu" in w and "workers' CPUs" in w for w in warnings(tpu, "auto")] \
        == [True]
    assert any("without a TPU worker_accelerator" in w
               for w in warnings("type:nvidia-l4;count:1;install-nvidia-driver", "tpu"))


def test_setup_file_package_is_staged_with_the_project_code(gpu_job):
    assert gpu_job["setup_file"] == os.path.join(REPO, "setup.py")  # read beside the config
    staged = {s["name"]: s for s in gpu_job["staged"]}
    assert {"workflow.tar.gz", "pipeline.pb"} <= set(staged)
    assert staged["workflow.tar.gz"]["location"].startswith(gpu_job["staging_location"])
    with tarfile.open(staged["workflow.tar.gz"]["local_path"]) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
    assert {"pipeline/run.py", "pipeline/job/embed.py", "models/encoders/bert.py"} <= members
    assert not any(m.startswith(("tests/", "benchmarks/")) for m in members)
    pool = gpu_job["dataflow_job"]["environment"]["workerPools"][0]
    assert "workflow.tar.gz" in {p["name"] for p in pool["packages"]}
    shipped = gpu_job["checks"]["worker_imports"]
    assert shipped["packages"] == ["beam_embed"]
    assert "beam_embed.pipeline.job.embed" in shipped["project_modules"]


def test_the_dry_run_shows_its_own_lines_not_the_sdist_build(tmp_path, capfd):
    # from a folder outside the repository: the config's setup_file is read beside the config
    code, job, _ = dry_run(str(tmp_path), "--config", CPU_CONFIG, cwd=str(tmp_path))
    assert code == 0 and job["setup_file"] == os.path.join(REPO, "setup.py")
    assert any(s["name"] == "workflow.tar.gz" for s in job["staged"])  # the sdist was built
    err = capfd.readouterr().err
    assert "previously-included" not in err  # setuptools' manifest lines
    assert "build.__main__" not in err and "No module named" not in err
    assert "dry run:" in err  # the tool's own line still shows


def test_remote_model_is_not_read(gpu_job):
    model = gpu_job["model"]
    assert model["loaded"] is False and model["widths"] is None
    assert model["encoder"] == "gs://my-bucket/models/all-MiniLM-L6-v2/encoder"
    assert model["poolings"] == ["mean"] and model["normalize"] is True
    assert gpu_job["inputs"]["remote_patterns_not_matched"] == ["gs://my-bucket/corpus/*.jsonl.gz"]


def test_local_model_is_loaded_and_flagged(tiny_export, tmp_path):
    code, job, _ = dry_run(str(tmp_path), "--config", CPU_CONFIG, "--model", tiny_export)
    assert code == 0
    assert job["model"]["loaded"] is True and job["model"]["widths"] == {"mean": 8}
    assert any("local path" in w and tiny_export in w for w in job["warnings"])
    assert job["worker"]["accelerator"] is None and job["worker"]["machine_type"] == "n2-standard-8"


class _WarmModel(beam.DoFn):
    """The classic mistake: a model loaded on the launcher and carried by the DoFn."""

    def __init__(self):
        self.model = None

    def process(self, element):
        yield element


def _with_extra_step(add):
    real = dataflow.build_pipeline

    def build(p, cfg, *args, **kwargs):
        real(p, cfg, *args, **kwargs)
        add(p, cfg)
    return mock.patch.object(dataflow, "build_pipeline", build)


def test_a_dofn_holding_a_loaded_model_fails_the_dry_run(tiny_export, tmp_path, capsys):
    def add(p, cfg):
        fn = _WarmModel()
        _ = p | "Seed" >> beam.Create([1]) | "WarmModel" >> beam.ParDo(fn)
        fn.model = cfg.encoder.build()  # after Beam's construction-time pickle check

    with _with_extra_step(add):
        code, _, _ = dry_run(str(tmp_path), "--config", GPU_CONFIG, "--model", tiny_export)
    assert code == 2
    assert "step 'WarmModel' cannot be serialized" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "job.json")


def test_a_lambda_capturing_a_model_fails_the_dry_run(tiny_export, tmp_path, capsys):
    def add(p, cfg):
        model = cfg.encoder.build()
        _ = p | "Seed" >> beam.Create(["x"]) | "Inline" >> beam.Map(lambda t: model.embed([t]))

    with _with_extra_step(add):
        code, _, _ = dry_run(str(tmp_path), "--config", GPU_CONFIG, "--model", tiny_export)
    assert code == 2
    assert "cannot be serialized for the workers" in capsys.readouterr().err


class _NotShipped(beam.DoFn):
    """Lives in tests/, which the staged package does not contain."""

    def process(self, element):
        yield element


def test_a_step_needing_unshipped_code_fails_the_dry_run(tmp_path, capsys):
    def add(p, cfg):
        _ = p | "Seed" >> beam.Create([1]) | "FromTests" >> beam.ParDo(_NotShipped())

    with _with_extra_step(add):
        code, _, _ = dry_run(str(tmp_path), "--config", GPU_CONFIG)
    assert code == 2
    err = capsys.readouterr().err
    assert "does not ship" in err and "tests" in err


def test_any_runner_gets_a_description(tmp_path):
    code, job, _ = dry_run(str(tmp_path), "--config", GPU_CONFIG, "--runner", "DirectRunner")
    assert code == 0 and job["dataflow_job"] is None
    assert "EmbedRecords/RunInference" in {s["name"] for s in job["steps"]}


def test_offline_prerequisites_are_named(tmp_path, capsys):
    bare = tmp_path / "bare.yaml"
    config = yaml.safe_load(open(GPU_CONFIG, encoding="utf-8"))
    for key in ("pooling", "normalize"):
        config.pop(key)
    bare.write_text(yaml.safe_dump(config))
    assert dry_run(str(tmp_path), "--config", str(bare))[0] == 2
    assert "give --pooling and --normalize or --no-normalize" in capsys.readouterr().err
    assert dry_run(str(tmp_path), "--config", GPU_CONFIG, "--temp_location=")[0] == 2
    assert "needs --temp_location" in capsys.readouterr().err
    assert dry_run(str(tmp_path), "--config", GPU_CONFIG, "--temp_location", "gs://x")[0] == 2
    assert "'gs://x' is not a valid gs://bucket/path" in capsys.readouterr().err


def test_dedupe_and_reuse_steps_are_described_without_reading_the_previous_run(tmp_path):
    code, job, _ = dry_run(str(tmp_path), "--config", GPU_CONFIG, "--dedupe",
                           "--reuse", "gs://no-such-bucket/previous")
    assert code == 0
    names = {s["name"] for s in job["steps"]}
    for step in ("EmbedRecords/KeyByText", "EmbedRecords/ReadPrevious",
                 "EmbedRecords/MatchTexts", "EmbedRecords/Encode/RunInference",
                 "EmbedRecords/BatchReused"):
        assert step in names, sorted(names)
    assert any("--reuse gs://no-such-bucket/previous" in w for w in job["warnings"])


def test_without_a_job_file_the_description_goes_to_stdout(tiny_export, tmp_path, capsys):
    """A local job's dry run, as one tries it first: the description is the only stdout, the
    tool's lines stay on stderr, and nothing is written."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "the cat sat", "lang": "en"}\n')
    with offline(str(tmp_path), cwd=str(tmp_path)) as attempts:
        code = main(["--input", str(corpus), "--model", tiny_export, "--output",
                     str(tmp_path / "out"), "--dry-run"])
    assert code == 0 and attempts == []
    out = capsys.readouterr()
    job = json.loads(out.out)
    assert job["runner"] == "DirectRunner" and job["model"]["widths"]
    assert "WriteShards" in {s["name"] for s in job["steps"]}
    assert "nothing was submitted -> stdout" in out.err
    assert not (tmp_path / "out").exists() and not (tmp_path / "output").exists()


@pytest.mark.parametrize("name, content", [
    ("c.jsonl", '{"id": "a", "body": "the cat sat"}\n'),
    ("c.csv", "id,body\na,the cat sat\n")])
def test_an_input_without_the_text_field_fails_the_dry_run_as_the_run(tiny_export, tmp_path,
                                                                      capsys, name, content):
    """The dry run reads the fields of the local files a run would read, and refuses what the
    run refuses, with the same line, before any output folder."""
    corpus = tmp_path / name
    corpus.write_text(content)
    args = ["--input", str(corpus), "--model", tiny_export, "--output", str(tmp_path / "out")]
    code, _, _ = dry_run(str(tmp_path), *args, cwd=str(tmp_path))
    dry = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and not os.path.exists(tmp_path / "job.json")
    assert main([*args, "--progress_every", "0"]) == 2
    real = capsys.readouterr().err.strip().splitlines()[-1]
    assert dry == real and "--text_field 'text' is not a" in dry and str(corpus) in dry
    assert not os.path.exists(tmp_path / "out")
