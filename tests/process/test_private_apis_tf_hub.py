"""TF-Hub's private marker in beam_embed/process/private_apis/tf_hub.py is still there,
with the signature and the behaviour relied on: an upgrade that changes one fails here, by
name."""

from __future__ import annotations

from beam_embed.process.private_apis import tf_hub as apis


def test_tf_hub_marks_and_reads_the_same_attribute():
    """Read from TF-Hub's sources: importing tensorflow_hub imports all of Keras 2."""
    import importlib.util
    from pathlib import Path

    folder = Path(importlib.util.find_spec("tensorflow_hub").submodule_search_locations[0])
    assert "obj._is_hub_module_v1 = is_hub_module_v1" in (folder / "module_v2.py").read_text()
    assert 'getattr(self._func, "_is_hub_module_v1", False)' in (
        folder / "keras_layer.py").read_text()
    loaded = type("Loaded", (), {})()
    apis.mark_hub_module_v1(loaded, True)
    assert loaded._is_hub_module_v1 is True
