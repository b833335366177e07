"""A model's prompts (sentence-transformers' `prompts` and `default_prompt_name`, which an export
carries in its beam_embed.json) and the one prompt a run applies, chosen as
sentence-transformers' `encode()` chooses it: `prompt` (a literal prefix) if given, else the
prompt named `prompt_name`, else the model's default prompt, else none. The prompt is prepended
to each text before it is tokenized (models/embedder.py).

Imports no TensorFlow: a prompt is checked before any model loads.
"""

from __future__ import annotations

import dataclasses
import json
import os

QUERY = "query"  # the prompt sentence-transformers' encode_query() applies, when the model has it


@dataclasses.dataclass(frozen=True)
class Prompts:
    """A model's prompts. `known`: False for a model that does not record them (not an export,
    or an export made before exports carried them); `include_prompt`: False when the model's
    Pooling leaves the prompt's tokens out of its mean."""
    prompts: tuple[tuple[str, str], ...] = ()
    default_name: str | None = None
    include_prompt: bool = True
    known: bool = False

    def named(self, name: str) -> str | None:
        return dict(self.prompts).get(name)

    def names(self) -> list[str]:
        return [n for n, _ in self.prompts]


NONE = Prompts()


def prompts_of(meta: dict) -> Prompts:
    """The prompts an export's metadata records, checked (a ValueError naming the bad value)."""
    if "prompts" not in meta:
        return dataclasses.replace(NONE, include_prompt=meta.get("include_prompt", True) is not False)
    found, default = meta.get("prompts"), meta.get("default_prompt_name")
    if not isinstance(found, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        raise ValueError(f"prompts {found!r} (expected an object of names to texts)")
    if default is not None and default not in found:
        raise ValueError(f"default_prompt_name {default!r} (expected one of its prompts "
                         f"{sorted(found)})")
    return Prompts(tuple(found.items()), default, meta.get("include_prompt", True) is not False,
                   known=True)


def recorded_prompts(encoder: str | None) -> Prompts:
    """The prompts recorded in the beam_embed.json of the export that `encoder` (an export's
    SavedModel folder) is in, read without TensorFlow; NONE for another model."""
    if not encoder:
        return NONE
    from beam_embed.models.export_format import METADATA_FILE
    from beam_embed.models.gcs_copy import local_copy

    path = local_copy(os.path.join(os.path.dirname(encoder.rstrip("/")), METADATA_FILE))
    if not os.path.isfile(path):
        return NONE
    with open(path, "rb") as f:
        meta = json.loads(f.read())
    try:
        return prompts_of(meta) if isinstance(meta, dict) else NONE
    except ValueError as e:
        raise ValueError(f"{path} has {e}") from e


@dataclasses.dataclass(frozen=True)
class Chosen:
    text: str  # prepended to every text; "" for none
    name: str | None  # the model's prompt it is, when named


def choose(model: str, prompts: Prompts, prompt_name: str | None = None,
           prompt: str | None = None) -> Chosen:
    """The prompt a run applies to `model` (its name, for messages): a ValueError for both
    given or a name the model does not have."""
    if prompt is not None and prompt_name is not None:
        raise ValueError("--prompt and --prompt_name were both given; expected one of them "
                         "(--prompt '' embeds the texts as they are)")
    if prompt is not None:
        chosen = Chosen(prompt, None)
    elif prompt_name is not None:
        if prompt_name not in prompts.names():
            has = (f"has the prompts {prompts.names()}" if prompts.names() else
                   "has no prompts" if prompts.known else
                   "records no prompts (export the model again to carry its "
                   "config_sentence_transformers.json prompts)")
            raise ValueError(f"unknown --prompt_name {prompt_name!r}: {model} {has}; expected "
                             f"one of {prompts.names()}")
        chosen = Chosen(prompts.named(prompt_name), prompt_name)
    elif prompts.default_name is not None:
        chosen = Chosen(prompts.named(prompts.default_name), prompts.default_name)
    else:
        chosen = Chosen("", None)
    return chosen


def describe(chosen: Chosen) -> str:
    """The prompt in words, for a log line."""
    if not chosen.text:
        return "no prompt"
    return (f"the model's prompt {chosen.name!r} ({chosen.text!r})" if chosen.name
            else f"the prompt {chosen.text!r}")
