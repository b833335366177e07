"""Each of google-auth's private APIs in beam_embed/process/private_apis/google_auth.py still there,
with the signature and the behaviour relied on: an upgrade that changes one fails here, by
name."""

from __future__ import annotations

import inspect

from beam_embed.process.private_apis import google_auth as apis


def _params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


# google-auth


def test_google_auths_gce_check_is_replaced_for_the_block_only():
    from google.auth import _default
    from google.auth.compute_engine import _metadata

    assert "_metadata.is_on_gce(request=request)" in inspect.getsource(_default)
    own = _metadata.is_on_gce
    seen = []
    with apis.gce_check_replaced(lambda request, check: seen.append(check) or True):
        assert _metadata.is_on_gce(request="r") is True
    assert _metadata.is_on_gce is own and seen == [own]


def test_the_firmware_is_read_and_the_metadata_server_asked_once():
    import types

    from google.auth import exceptions
    from google.auth.compute_engine import _metadata

    assert isinstance(apis.gce_by_firmware(), bool)  # reads a file, asks no one
    assert _params(_metadata.ping) == ["request", "timeout", "retry_count"]
    tried = []

    def refused(**kwargs):  # google-auth's transport, where no metadata server listens
        tried.append(kwargs["timeout"])
        raise exceptions.TransportError("connection refused")

    assert apis.metadata_server_answers(refused, 0.25) is False
    assert tried == [0.25]  # one try, for the time given

    def answers(**kwargs):
        return types.SimpleNamespace(status=200, headers={"metadata-flavor": "Google"})

    assert apis.metadata_server_answers(answers, 0.25) is True
