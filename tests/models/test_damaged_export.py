"""A damaged model is refused: exit 2 and one line naming the file, before any output folder is
created or touched. An `export-model` folder's metadata, SavedModels, variables files and
vocabulary each have their own check and message (models/export_format.py, the variables
against their index in models/hub_loader.py); so does a Hugging Face checkpoint's
model.safetensors at export time (models/export/hf_checkpoint.py)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from beam_embed.models import hub_loader
from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.cli import main as cli
from tests.job_helpers import run_job, write_lines

SAVED_MODELS = ("encoder", "encoder_bf16", "encoder_fp16", "preprocessor")
DATA = os.path.join("variables", "variables.data-00000-of-00001")
INDEX = os.path.join("variables", "variables.index")


def _truncate(path: str, size: int) -> str:
    with open(path, "r+b") as f:
        f.truncate(size)
    return path


def _flip(path: str, at: int) -> str:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
    return path


def _metadata(folder: str, change) -> str:
    """Rewrites the export's beam_embed.json as change(meta) returns it (a str: written as is)."""
    path = os.path.join(folder, "beam_embed.json")
    with open(path) as f:
        meta = json.load(f)
    new = change(meta)
    with open(path, "w") as f:
        f.write(new if isinstance(new, str) else json.dumps(new))
    return path


def _without(*keys):
    return lambda meta: {k: v for k, v in meta.items() if k not in keys}


def _remove(path: str) -> str:
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    return path


# name -> (damage(export folder) -> the damaged file or folder, what the message says of it)
DAMAGE = {
    "metadata missing": (
        lambda d: _remove(os.path.join(d, "beam_embed.json")),
        r"is missing: .* has the encoder/ and preprocessor/ of an export, but without its "
        r"metadata the model's pooling, normalization and length are unknown"),
    "metadata not JSON": (
        lambda d: _metadata(d, lambda m: '{"kind": "bert",\n'),
        r"is not valid JSON \(Expecting property name enclosed in double quotes: line 2"),
    "metadata a list": (
        lambda d: _metadata(d, lambda m: "[1, 2]"),
        r"holds a JSON list, not the object an export writes"),
    "metadata lacks keys": (
        lambda d: _metadata(d, _without("pooling", "normalize")),
        r"lacks \['pooling', 'normalize'\]; an export's metadata has \['format_version', "),
    "metadata value of the wrong type": (
        lambda d: _metadata(d, lambda m: {**m, "normalize": "yes", "max_seq_length": 0}),
        r"has normalize 'yes' \(expected true or false\); max_seq_length 0 \(expected a "
        r"positive integer\)"),
    "metadata encoders not folder names": (
        lambda d: _metadata(d, lambda m: {**m, "encoders": {"fp32": 3}}),
        r"has encoders \{'fp32': 3\} \(expected folder names\)"),
    "metadata pooling unknown": (
        lambda d: _metadata(d, lambda m: {**m, "pooling": "avg"}),
        r": unknown pooling 'avg'; expected one of \['cls', 'lasttoken', 'max', 'mean', 'mean_sqrt_len_tokens', 'pooled_output', 'weightedmean'\]"),
    "metadata kind unknown": (
        lambda d: _metadata(d, lambda m: {**m, "kind": "gpt"}),
        r"has kind 'gpt'; expected one of \['bert', "),
    "encoder data cut short": (
        lambda d: _truncate(os.path.join(d, "encoder", DATA), 5000),
        r"is cut short: 5000 bytes where its index places tensors up to byte \d+"),
    "bf16 encoder data cut short": (
        lambda d: _truncate(os.path.join(d, "encoder_bf16", DATA), 100),
        r"is cut short: 100 bytes where its index places tensors up to byte \d+"),
    "preprocessor data cut short": (
        lambda d: _truncate(os.path.join(d, "preprocessor", DATA), 10),
        r"is cut short: 10 bytes where its index places tensors up to byte \d+"),
    "encoder data missing": (
        lambda d: _remove(os.path.join(d, "encoder", DATA)),
        r"is missing: .*variables\.index names 1 data file\(s\)"),
    "encoder index cut short": (
        lambda d: _truncate(os.path.join(d, "encoder", INDEX), 1000),
        r"is damaged \(not a checkpoint index: its footer has no table magic number\)"),
    "encoder index missing": (
        lambda d: _remove(os.path.join(d, "encoder", INDEX)),
        r"is missing: the SavedModel's variables cannot be read without it"),
    "encoder graph missing": (
        lambda d: _remove(os.path.join(d, "encoder", "saved_model.pb")),
        r"is missing: the SavedModel's graph"),
    "encoder graph empty": (
        lambda d: _truncate(os.path.join(d, "encoder", "saved_model.pb"), 0),
        r"is empty: the SavedModel's graph"),
    "fp16 encoder missing": (
        lambda d: _remove(os.path.join(d, "encoder_fp16")),
        r"is missing: beam_embed\.json lists it as one of the export's SavedModels"),
    "vocabulary cut short": (
        lambda d: _truncate(os.path.join(d, "preprocessor", "assets", "vocab.txt"), 60),
        r"has 13 entries where beam_embed\.json's vocab_size is 30"),
    "vocabulary missing": (
        lambda d: _remove(os.path.join(d, "preprocessor", "assets", "vocab.txt")),
        r"is missing: the preprocessor's WordPiece vocabulary"),
}


def _checked(message: str, damaged: str, says: str) -> None:
    assert damaged in message, message
    assert re.search(says, message), message
    assert "\n" not in message


def test_the_index_reader_finds_where_each_data_file_ends(tiny_export):
    """The variables' check reads TensorFlow's checkpoint index (a LevelDB-format table) itself:
    on a whole export, each SavedModel's tensors end exactly at its data file's end."""
    for sub in SAVED_MODELS:
        with open(os.path.join(tiny_export, sub, INDEX), "rb") as f:
            found = hub_loader.bundle_extents(f.read())
        assert found == (1, {0: os.path.getsize(os.path.join(tiny_export, sub, DATA))}), sub


def test_a_whole_export_passes_its_checks(fresh_export):
    spec = encoder_spec(fresh_export)
    assert (spec.poolings, spec.max_seq_length) == (("cls",), 64)  # the tiny export's metadata


@pytest.mark.parametrize("case", list(DAMAGE))
def test_each_damage_is_refused_naming_the_file_before_any_load(fresh_export, loads, case):
    damage, says = DAMAGE[case]
    damaged = damage(fresh_export)
    with pytest.raises(ValueError) as e:
        encoder_spec(fresh_export)
    _checked(str(e.value), damaged, says)
    assert loads == []  # found from the files alone


def test_a_folder_neither_an_export_nor_a_saved_model_says_what_it_holds(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "encoder").mkdir()
    with pytest.raises(ValueError, match=r"is neither a `beam-embed export-model` folder \(no "
                       r"beam_embed\.json, encoder/, preprocessor/\) nor a SavedModel \(no "
                       r"saved_model\.pb\); it holds \['encoder', 'notes\.txt'\]"):
        encoder_spec(str(tmp_path))


def test_handles_given_directly_are_checked_before_any_load(fresh_export, loads):
    data = _truncate(os.path.join(fresh_export, "encoder", DATA), 5000)
    with pytest.raises(ValueError) as e:
        encoder_spec(encoder=os.path.join(fresh_export, "encoder"),
                     preprocessor=os.path.join(fresh_export, "preprocessor"))
    _checked(str(e.value), data, r"is cut short: 5000 bytes where its index places tensors")
    assert loads == []


def test_loading_a_saved_model_cut_short_names_the_file(fresh_export):
    """What a worker's load says (TensorFlow's restore would raise IndexError: "Read less bytes
    than requested", naming nothing)."""
    data = _truncate(os.path.join(fresh_export, "preprocessor", DATA), 10)
    with pytest.raises(hub_loader.HandleError) as e:
        hub_loader.load_handle(os.path.join(fresh_export, "preprocessor"))
    _checked(str(e.value), data, r"is cut short: 10 bytes where its index places tensors up to "
                                 r"byte \d+; copy, download or export the model again")


def test_a_checksum_mismatch_found_by_the_load_says_the_model_is_damaged(fresh_export):
    """Bytes changed in place pass the size checks; TensorFlow's restore finds them by checksum,
    and the line says so (not "check the network")."""
    encoder = os.path.join(fresh_export, "encoder")
    _flip(os.path.join(encoder, DATA), 5000)
    encoder_spec(fresh_export)  # every file is there and as long as it should be
    with pytest.raises(hub_loader.HandleError) as e:
        hub_loader.load_handle(encoder)
    _checked(str(e.value), os.path.join(encoder, "variables", "variables"),
             r"model handle '.*' is damaged \(TensorBundle at .* Checksum does not match.*\); "
             r"copy, download or export the model again")


# --- the commands -----------------------------------------------------------------------------

def _one_line(err: str, prog: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), err
    return lines[0].removeprefix(f"{prog}: ")


@pytest.fixture
def corpus(tmp_path):
    return write_lines(str(tmp_path / "corpus.txt"), ["the cat sat on the mat", "a dog"])


def _run(capsys, corpus: str, model: str, out: str) -> tuple[int, str]:
    code = cli(["run", "--input", corpus, "--model", model, "--output", out,
                "--progress_every", "0"])
    return code, capsys.readouterr().err


@pytest.mark.pipeline
@pytest.mark.parametrize("case", ["metadata missing", "metadata not JSON", "metadata lacks keys",
                                  "encoder data cut short", "vocabulary cut short"])
def test_run_refuses_a_damaged_export_before_creating_its_output(fresh_export, corpus, tmp_path,
                                                                 capsys, case):
    damage, says = DAMAGE[case]
    damaged = damage(fresh_export)
    out = tmp_path / "out"
    code, err = _run(capsys, corpus, fresh_export, str(out))
    assert code == 2, err
    _checked(_one_line(err, "beam-embed run"), damaged, says)
    assert not out.exists()


@pytest.mark.pipeline
def test_run_leaves_an_existing_output_folder_untouched(fresh_export, corpus, tmp_path, capsys):
    """Not even claimed: the claim's file, made and removed, would change the folder's time."""
    damage, says = DAMAGE["encoder data cut short"]
    damaged = damage(fresh_export)
    out = tmp_path / "out"
    out.mkdir()
    before = os.stat(out).st_mtime_ns
    code, err = _run(capsys, corpus, fresh_export, str(out))
    assert code == 2, err
    _checked(_one_line(err, "beam-embed run"), damaged, says)
    assert os.listdir(out) == [] and os.stat(out).st_mtime_ns == before


@pytest.mark.pipeline
def test_run_on_a_model_damaged_in_place_exits_2_and_leaves_no_folder(fresh_export, corpus,
                                                                      tmp_path, capsys):
    """Only the load finds changed bytes (by checksum): still one line and exit 2, and the
    folder the run made is removed."""
    _flip(os.path.join(fresh_export, "encoder", DATA), 5000)
    out = tmp_path / "out"
    code, err = _run(capsys, corpus, fresh_export, str(out))
    assert code == 2, err
    line = _one_line(err, "beam-embed run")
    assert "is damaged (" in line and "Checksum does not match" in line, line
    assert not out.exists()


@pytest.fixture(scope="module")
def embedded(tiny_export, tmp_path_factory):
    """A finished run with the whole tiny export, for search."""
    folder = tmp_path_factory.mktemp("embedded")
    corpus = write_lines(str(folder / "corpus.txt"), ["the cat sat on the mat", "a dog"])
    out = str(folder / "out")
    run_job(out, "--input", corpus, "--model", tiny_export, "--format", "parquet")
    return out


@pytest.mark.pipeline
@pytest.mark.parametrize("command", ["search", "eval", "similarity", "tokens"])
def test_the_other_commands_refuse_the_damaged_export_the_same_way(
        fresh_export, embedded, capsys, command):
    damage, says = DAMAGE["encoder data cut short"]
    damaged = damage(fresh_export)
    argv = {"search": ["search", embedded, "a cat", "--model", fresh_export],
            "eval": ["eval", "--model", fresh_export],
            "similarity": ["similarity", "the cat sat", "--words", "cat", "--model",
                           fresh_export],
            "tokens": ["tokens", "the cat sat", "--model", fresh_export]}[command]
    code = cli(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    _checked(_one_line(err, f"beam-embed {command}"), damaged, says)


# --- export-model from a damaged Hugging Face checkpoint --------------------------------------

@pytest.fixture
def checkpoint(tiny_checkpoint, tmp_path):
    folder = str(tmp_path / "checkpoint")
    shutil.copytree(tiny_checkpoint[0], folder)
    return folder


def _sharded(folder: str) -> str:
    """The checkpoint as a one-shard index, as big checkpoints come."""
    from safetensors import safe_open

    shard = os.path.join(folder, "model-00001-of-00001.safetensors")
    os.replace(os.path.join(folder, "model.safetensors"), shard)
    with safe_open(shard, framework="np") as f:
        names = list(f.keys())
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": dict.fromkeys(names, os.path.basename(shard))}, f)
    return shard


def _append(path: str, extra: bytes) -> str:
    with open(path, "ab") as f:
        f.write(extra)
    return path


def _bad_header(path: str) -> str:
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(b"{bad")
    return path


SAFETENSORS_DAMAGE = {
    "cut short": (lambda d: _truncate(os.path.join(d, "model.safetensors"), 6000),
                  r"is cut short: 6000 bytes where its header places tensors up to byte \d+"),
    "cut inside its header": (lambda d: _truncate(os.path.join(d, "model.safetensors"), 20),
                              r"is cut short: 20 bytes, less than its header"),
    "a shard cut short": (lambda d: _truncate(_sharded(d), 6000),
                          r"is cut short: 6000 bytes where its header places tensors"),
    "header not JSON": (lambda d: _bad_header(os.path.join(d, "model.safetensors")),
                        r"is not a safetensors file: its header is damaged \(JSONDecodeError: "),
    "bytes past its tensors": (
        lambda d: _append(os.path.join(d, "model.safetensors"), b"\0" * 10),
        r"cannot be read as safetensors \(Error while deserializing header: incomplete "
        r"metadata, file not fully covered\)"),
}


@pytest.mark.pipeline
@pytest.mark.parametrize("case", list(SAFETENSORS_DAMAGE))
def test_export_model_refuses_damaged_safetensors_naming_the_file(checkpoint, tmp_path, capsys,
                                                                  case):
    damage, says = SAFETENSORS_DAMAGE[case]
    damaged = damage(checkpoint)
    out = tmp_path / "export"
    code = cli(["export-model", checkpoint, str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    _checked(_one_line(err, "beam-embed export-model"), damaged, says)
    assert not out.exists()
