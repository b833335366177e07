"""export-model recognizes a folder's layout, finds a google-research/bert folder's TF checkpoint,
and fails in one line, before reading weights, on anything it cannot export."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_embed.models.export.checkpoint import CheckpointError
from beam_embed.models.export.checkpoint_layout import inspect_checkpoint
from beam_embed.models.export.convert import export_checkpoint
from tests.bert_reference import write_checkpoint
from tests.models.google_reference import write_google_folder


def _touch(folder, *names, text="x"):
    for name in names:
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)


def test_a_folder_of_neither_layout_names_what_was_looked_for_and_found(tmp_path):
    _touch(tmp_path, "weights.h5", "notes.txt")
    with pytest.raises(CheckpointError) as info:
        inspect_checkpoint(str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(tmp_path))
    for expected in ("has no config.json", "no bert_config.json", "found: notes.txt, weights.h5"):
        assert expected in message


def test_cli_reports_neither_layout(tmp_path, capsys):
    from beam_embed.pipeline.cli import main

    _touch(tmp_path, "README.md")
    assert main(["export-model", str(tmp_path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bert_config.json" in err and "found: README.md" in err and not os.path.exists(
        tmp_path / "out")


def test_layout_choice(tmp_path):
    hf, google = str(tmp_path / "hf"), str(tmp_path / "google")
    write_checkpoint(hf)
    write_google_folder(google)
    assert inspect_checkpoint(hf).layout == "huggingface"
    assert inspect_checkpoint(google).layout == "google-research/bert"
    shutil.copy(os.path.join(google, "bert_config.json"), hf)  # both configs: HF weights win
    assert inspect_checkpoint(hf).layout == "huggingface"
    both = inspect_checkpoint(google, lower_case=False)
    assert (both.tokenizer.lower_case, both.tokenizer.lower_case_source) == (False,
                                                                              "--no-lower-case")


def _rename(folder, old, new):
    for name in os.listdir(folder):
        if name.startswith(old + "."):
            os.rename(os.path.join(folder, name), os.path.join(folder, new + name[len(old):]))


def _config(folder, drop=(), **changes):
    path = os.path.join(folder, "bert_config.json")
    with open(path) as f:
        config = json.load(f)
    with open(path, "w") as f:
        json.dump({k: v for k, v in (config | changes).items() if k not in drop}, f)


def _no_checkpoint(folder):
    for name in os.listdir(folder):
        if name.startswith("bert_model.ckpt."):
            os.remove(os.path.join(folder, name))


def _two_checkpoints(folder):
    _rename(folder, "bert_model.ckpt", "model.ckpt-1")
    write_google_folder(folder, checkpoint="model.ckpt-2")


@pytest.mark.parametrize("edit, kwargs, message", [
    (_two_checkpoints, {}, r"several TF checkpoints \['model.ckpt-1', 'model.ckpt-2'\] and no "
                           "checkpoint file"),
    (lambda d: _touch(d, "checkpoint"), {}, "checkpoint names no latest checkpoint"),
    (lambda d: _touch(d, "checkpoint", text='model_checkpoint_path: "m-9"'), {},
     r"names '.*m-9' as the latest checkpoint, but m-9.index is not in"),
    (lambda d: None, {"checkpoint": "model.ckpt-7"}, "--checkpoint 'model.ckpt-7': no "),
    (_no_checkpoint, {}, "has bert_config.json but no TF checkpoint"),
    (lambda d: _config(d, hidden_act="swish"), {},
     r"hidden_act 'swish' is not supported; expected one of \['gelu', 'gelu_new', 'relu'\]"),
    (lambda d: _config(d, vocab_size=31), {}, "does not belong to these weights"),
    (lambda d: _config(d, drop=("hidden_size",), num_hidden_layers="2"), {},
     r"bert_config.json lacks integer \['hidden_size', 'num_hidden_layers'\]"),
    (lambda d: os.remove(os.path.join(d, "bert_model.ckpt.data-00000-of-00001")), {},
     "bert_model.ckpt: not a readable TF checkpoint"),
    (lambda d: os.remove(os.path.join(d, "bert_config.json")), {"checkpoint": "bert_model.ckpt"},
     "has no bert_config.json; --checkpoint needs the google-research/bert folder"),
])
def test_bad_google_folders_fail_with_one_clear_line(tmp_path, edit, kwargs, message):
    src = str(tmp_path / "google")
    write_google_folder(src)
    edit(src)
    with pytest.raises(CheckpointError, match=message) as info:
        export_checkpoint(src, str(tmp_path / "out"), **kwargs)
    assert "\n" not in str(info.value)
    assert not os.path.exists(tmp_path / "out")  # nothing written
