"""The layering's promises that import-linter cannot see: which modules stay TensorFlow-free, and
that the encoder registry agrees with the encoders it names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from beam_embed.models.encoders import KINDS

# Each snippet runs in a fresh interpreter (this one has TensorFlow loaded already) and prints
# the TensorFlow-related modules it imported.
CHECK = """
import json, sys
{code}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
                        ("tensorflow", "tensorflow_hub", "tensorflow_text", "keras", "tf_keras"))))
"""
TF_FREE = {
    "the CLI": "import beam_embed.pipeline.cli",
    "run's option parser": "from beam_embed.pipeline.job.beam_options import parse\n"
                           "parse(['--pooling', 'mean,cls', '--output', '/tmp/x'])",
    "run's settings": "from beam_embed.pipeline.job.settings import RunSettings\n"
                      "RunSettings(pooling='mean,cls', format='parquet')\n"
                      "from beam_embed.pipeline.job import resolved",
    "pca's option parser": "from beam_embed.pipeline.pca.command import parse_args\n"
                           "parse_args(['--input', 'a', '--output', 'b'])",
    "search's option parser": "from beam_embed.pipeline.search.command import parse_args\n"
                              "parse_args(['out', 'a query'])",
    "eval's option parser": "from beam_embed.pipeline.evaluate.command import parse_args\n"
                            "parse_args(['--pairs', 'p.tsv'])",
    "tokens and similarity": "import beam_embed.pipeline.inspect.tokens, beam_embed.pipeline.inspect.similarity",
    "export-model": "import beam_embed.pipeline.export.command",
    "the encoder spec and registry": "from beam_embed.models.spec import encoder_spec\n"
                                     "from beam_embed.models.encoders import KINDS\n"
                                     "[k.parse_poolings(['mean']) for k in KINDS.values()"
                                     " if 'mean' in k.poolers]",
    "token vectors": "import beam_embed.models.tokens",
    "a TPU's fixed shapes": "from beam_embed.models.spec import EncoderSpec\n"
                            "EncoderSpec('bert', 'e', 'p', 128, ('mean',), True, 'truncate',"
                            " accelerator='tpu').fixed_shapes().shapes()",
    "run --help": "from beam_embed.pipeline.cli import main\nmain(['run', '--help'])",
    "a misspelled flag": "from beam_embed.pipeline.cli import main\n"
                         "assert main(['run', '--poolin', 'mean']) == 2",
}


@pytest.mark.parametrize("what", sorted(TF_FREE))
def test_imports_no_tensorflow(what, tmp_path):
    out = subprocess.run([sys.executable, "-c", CHECK.format(code=TF_FREE[what])],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], f"{what} imports TensorFlow"


def test_the_process_package_imports_nothing_heavy(tmp_path):
    """beam_embed.process is below everything, --help included: every module of it imports
    neither TensorFlow, Beam, numpy, pyarrow nor google-auth when it is imported."""
    code = ("import importlib, json, pkgutil, sys\n"
            "import beam_embed.process as p\n"
            "for m in pkgutil.iter_modules(p.__path__):\n"
            "    importlib.import_module(f'beam_embed.process.{m.name}')\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow',\n"
            "    'apache_beam', 'numpy', 'pyarrow', 'keras'} | {'google.auth'} & set(sys.modules))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120, env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_registry_precisions_are_the_exported_graphs():
    from beam_embed.models.encoder_choices import PRECISIONS
    from beam_embed.models.encoders import KINDS
    from beam_embed.models.export.bert_encoder import LOW_PRECISIONS

    assert KINDS["bert"].precisions == PRECISIONS == ("fp32", *LOW_PRECISIONS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_implements_the_encoder_interface(kind):
    from beam_embed.models.encoder import Encoder

    registry = KINDS[kind]
    cls = registry.encoder_class()
    assert issubclass(cls, Encoder) and cls.kind == kind
    assert not getattr(cls, "__abstractmethods__", None)  # every abstract member implemented
    # a kind that says how a lone handle is recognized must recognize it itself
    assert bool(registry.recognized_by) == (cls.recognize.__func__ is not
                                            Encoder.recognize.__func__)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_kind_runs_on_a_tpu_exactly_when_it_has_length_buckets(kind):
    registry = KINDS[kind]
    assert ("tpu" in registry.accelerators) == bool(registry.fixed_lengths)
    assert list(registry.fixed_lengths) == sorted(set(registry.fixed_lengths))


def test_unknown_kind_names_the_kinds():
    from beam_embed.models.encoders import encoder_kind

    with pytest.raises(ValueError, match=r"unknown encoder kind 'gpt'; expected one of \['bert'"):
        encoder_kind("gpt")
