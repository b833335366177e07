"""TF-Hub's private marker, set by the models' loader (beam_embed.models.hub_loader) without
importing tensorflow_hub.
"""

from __future__ import annotations


def mark_hub_module_v1(loaded, is_hub_module_v1: bool) -> None:
    """Marks a SavedModel loaded by `tf.saved_model.load` as tensorflow_hub's `hub.load` marks
    what it loads (`_is_hub_module_v1`, which `hub.KerasLayer` reads to call a TF1 Hub module
    its way): the models load folders without importing tensorflow_hub, which imports all of
    Keras 2 first."""
    loaded._is_hub_module_v1 = is_hub_module_v1
