"""A handle given alone: recognized by what its SavedModel holds, or refused naming the kinds
tried and what was found."""

from __future__ import annotations

import pytest

from beam_embed.models.encoders import KINDS
from beam_embed.models.presets import handle_name, load_presets, resolve
from beam_embed.models.spec import encoder_spec
from beam_embed.pipeline.job.command import main


@pytest.mark.pipeline
def test_a_tf2_bert_encoder_alone_fits_no_kind(tiny_export, tmp_path, capsys):
    corpus = tmp_path / "never-read.txt"
    code = main(["--input", str(corpus), "--encoder", f"{tiny_export}/encoder",
                 "--output", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "fits no encoder kind; tried bert_tf1 (tags [] with signatures tokens(input_ids, " \
           "input_mask, segment_ids) and tokenization_info()); elmo (" in err
    assert "text_in (a TF2 SavedModel callable" in err
    assert "Found: tags ['serve']: signatures serving_default(input_mask: int32 [None, None], " \
           "input_type_ids: int32 [None, None], input_word_ids: int32 [None, None]) -> " in err
    assert "callable as __call__(input_mask: int32 [None, None]" in err
    assert "give its --preprocessor too" in err and len(err.strip().splitlines()) == 1


def test_a_folder_without_a_saved_model(tmp_path):
    with pytest.raises(ValueError, match="holds no SavedModel"):
        encoder_spec(encoder=str(tmp_path))


def test_model_flag_takes_saved_models_and_exports(tiny_export, text_in, tf1_bert):
    assert resolve(text_in[0]).kind == "text_in"
    assert (resolve(tf1_bert[0]).kind, resolve(tf1_bert[0]).max_seq_length) == ("bert_tf1", 16)
    export = resolve(tiny_export)
    assert (export.kind, export.encoder) == ("bert", f"{tiny_export}/encoder")


def test_new_presets_resolve_without_loading():
    presets = load_presets()
    for name in ("bert-base-uncased-tf1", "universal-sentence-encoder", "nnlm-en-dim128"):
        spec = encoder_spec(name)  # URLs, never fetched: the preset names the kind
        assert spec.kind == presets[name]["kind"] and spec.kind in KINDS
        assert spec.poolings == tuple(presets[name]["pooling"])
    assert encoder_spec("bert-base-uncased-tf1").max_seq_length == 512
    assert encoder_spec("universal-sentence-encoder").max_seq_length is None


def test_names_from_handles():
    assert handle_name("https://tfhub.dev/google/universal-sentence-encoder/4") == \
        "universal-sentence-encoder-4"
    assert handle_name("/models/my_module/") == "my_module"


def test_a_dry_run_does_not_read_a_remote_handle_to_recognize_it(tmp_path, capsys):
    code = main(["--encoder", "gs://bucket/models/use", "--dry-run", "--job-file",
                 str(tmp_path / "job.json"), "--output", str(tmp_path / "o")])
    assert code == 2
    assert "a dry run does not read the remote handle 'gs://bucket/models/use'" in \
        capsys.readouterr().err
