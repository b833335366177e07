"""What each kind's Encoder class answers about a model without running it: its fingerprint
(the value manifests of every version hold), its positions, whether a folder without a
SavedModel reaches the kinds, and which kind a --preprocessor pair is."""

from __future__ import annotations

import hashlib
import os

from beam_embed.models import saved_model
from beam_embed.models.encoders import KINDS, paired_kind
from beam_embed.models.encoders.detect import read_facts
from beam_embed.models.spec import encoder_spec, fingerprint


def _pb(folder: str) -> bytes:
    with open(os.path.join(folder, "saved_model.pb"), "rb") as f:
        return f.read()


def test_saved_model_fingerprints_are_the_ones_manifests_hold(tiny_export):
    """Manifests hold the kind's fingerprint (tests/models/test_fingerprint.py says what it
    covers); those of earlier versions hold sha256 over the saved_model.pb files, which the
    kind still knows."""
    encoder, preprocessor = f"{tiny_export}/encoder", f"{tiny_export}/preprocessor"
    expected = saved_model.fingerprint(encoder, preprocessor)
    assert fingerprint("bert", encoder, preprocessor) == expected
    assert encoder_spec(tiny_export).fingerprint() == expected
    earlier = hashlib.sha256(_pb(encoder) + _pb(preprocessor)).hexdigest()[:16]
    assert KINDS["bert"].encoder_class().earlier_fingerprints(encoder, preprocessor) == (earlier,)
    remote = "https://tfhub.dev/google/elmo/3"  # never fetched: the handle itself is hashed
    assert KINDS["elmo"].encoder_class().earlier_fingerprints(remote) == (
        hashlib.sha256(remote.encode()).hexdigest()[:16],)


def test_positions_as_each_kind_reads_them(tiny_export, tf1_bert, text_in):
    assert encoder_spec(tiny_export).max_positions() == 64  # beam_embed.json
    assert encoder_spec(encoder=tf1_bert[0]).max_positions() == 16  # the variables' index
    assert encoder_spec(encoder=text_in[0]).max_positions() is None


def test_a_folder_without_a_saved_model_reaches_the_kinds(tmp_path):
    found = read_facts(str(tmp_path))
    assert found.graphs == () and found.folder == str(tmp_path)
    assert all(kind.encoder_class().recognize(str(tmp_path), found) is None
               for kind in KINDS.values() if kind.recognized_by)


def test_an_encoder_with_a_preprocessor_is_the_kind_that_pairs():
    assert paired_kind() == "bert"
    assert [k.name for k in KINDS.values() if k.preprocessor] == ["bert"]
