"""Which encoder kind a handle given alone (`--encoder H`) is.

The SavedModel's own description (saved_model.pb: each graph's tags and signatures) is read
without loading any weights (a folder without one has no graphs: a kind of another format
recognizes its own files there); each kind that can be recognized (beam_embed.models.encoders.KINDS, in order)
then says whether the handle is one of its models (Encoder.recognize), loading it if it must
(once per process, so building the encoder afterwards costs nothing more). A handle that fits
no kind fails naming the kinds tried and what was found.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf
from google.protobuf import text_format
from tensorflow.core.protobuf import saved_model_pb2

from beam_embed.models.encoders import KINDS
from beam_embed.models.hub_loader import HandleError, load_once, resolve_handle


def _dtype(enum: int) -> str:
    return tf.dtypes.as_dtype(enum).name if enum else "?"


def _shape(proto) -> tuple[int, ...] | None:
    return None if proto.unknown_rank else tuple(d.size for d in proto.dim)


def describe_tensor(name: str, dtype: str, shape) -> str:
    dims = "?" if shape is None else "[" + ", ".join(
        "None" if d is None or d < 0 else str(d) for d in shape) + "]"
    return f"{name}: {dtype} {dims}"


@dataclasses.dataclass(frozen=True)
class Signature:
    inputs: dict[str, tuple[str, tuple | None]]  # name -> (dtype, shape; -1 unknown)
    outputs: dict[str, tuple[str, tuple | None]]

    def describe(self, name: str) -> str:
        def side(tensors):
            return ", ".join(describe_tensor(k, *v) for k, v in sorted(tensors.items()))
        return f"{name}({side(self.inputs)}) -> {{{side(self.outputs)}}}"


@dataclasses.dataclass(frozen=True)
class MetaGraph:
    tags: tuple[str, ...]
    signatures: dict[str, Signature]
    tf2: bool  # has an object graph: loads as an object whose functions can be called


@dataclasses.dataclass(frozen=True)
class SavedModelFacts:
    """A SavedModel as its saved_model.pb describes it."""

    handle: str
    folder: str  # the local (or gs://) folder the handle resolved to
    graphs: tuple[MetaGraph, ...]  # () when the folder holds no SavedModel

    def graph(self, tags: tuple[str, ...] = ()) -> MetaGraph | None:
        return next((g for g in self.graphs if set(g.tags) == set(tags)), None)

    def describe(self) -> str:
        parts = []
        for g in self.graphs:
            signatures = "; ".join(s.describe(name) for name, s in sorted(g.signatures.items())
                                   if not name.startswith("__")) or "none"
            parts.append(f"tags {list(g.tags)}: signatures {signatures}"
                         + (f"; {callable_description(load_once(self.handle))}" if g.tf2 else ""))
        return " | ".join(parts)


def call_functions(loaded) -> list:
    """The traced (concrete) functions of a loaded TF2 object's own call; [] if it has none."""
    return list(getattr(loaded.__call__, "concrete_functions", None) or []
                ) if callable(loaded) else []


def callable_description(loaded) -> str:
    """`__call__(inputs) -> outputs` of each traced call of a loaded TF2 object."""
    calls = call_functions(loaded)
    if not calls:
        return "not callable"

    def spec(s):
        return describe_tensor(s.name or "?", s.dtype.name, s.shape.as_list()
                               if s.shape.rank is not None else None)

    def out(o):
        if isinstance(o, dict):
            return "{" + ", ".join(f"{k}: {out(v)}" for k, v in sorted(o.items())) + "}"
        return spec(o).split(": ", 1)[1] if hasattr(o, "dtype") else type(o).__name__

    shown = []
    for fn in calls:
        args, kwargs = fn.structured_input_signature
        inputs = [spec(a) for a in tf.nest.flatten(args) if hasattr(a, "dtype")]
        inputs += [spec(v) for v in tf.nest.flatten(kwargs) if hasattr(v, "dtype")]
        shown.append(f"__call__({', '.join(inputs)}) -> {out(fn.structured_outputs)}")
    return "callable as " + ", ".join(shown)


def read_facts(handle: str) -> SavedModelFacts:
    """The tags and signatures of every graph in the handle's SavedModel (no weights read);
    no graphs when its folder holds no SavedModel."""
    folder = resolve_handle(handle)
    proto = saved_model_pb2.SavedModel()
    pb, pbtxt = os.path.join(folder, "saved_model.pb"), os.path.join(folder, "saved_model.pbtxt")
    if tf.io.gfile.exists(pb):
        with tf.io.gfile.GFile(pb, "rb") as f:
            proto.ParseFromString(f.read())
    elif tf.io.gfile.exists(pbtxt):
        with tf.io.gfile.GFile(pbtxt) as f:
            text_format.Parse(f.read(), proto)
    else:  # no graphs: kinds of other formats may still recognize the folder's own files
        return SavedModelFacts(handle, folder, ())
    graphs = tuple(
        MetaGraph(tags=tuple(g.meta_info_def.tags),
                  signatures={name: Signature(
                      {k: (_dtype(t.dtype), _shape(t.tensor_shape)) for k, t in s.inputs.items()},
                      {k: (_dtype(t.dtype), _shape(t.tensor_shape)) for k, t in s.outputs.items()})
                      for name, s in g.signature_def.items()},
                  tf2=bool(g.object_graph_def.nodes))
        for g in proto.meta_graphs)
    return SavedModelFacts(handle, folder, graphs)


def detect(handle: str) -> tuple[str, dict]:
    """(kind, facts learned: ModelSpec fields such as max_seq_length) for a handle given alone;
    ValueError naming the kinds tried and what the handle holds when it fits none."""
    found = read_facts(handle)
    tried = []
    for kind in KINDS.values():
        if not kind.recognized_by:
            continue
        learned = kind.encoder_class().recognize(handle, found)
        if learned is not None:
            return kind.name, learned
        tried.append(f"{kind.name} ({kind.recognized_by})")
    if not found.graphs:
        raise HandleError(f"model handle {handle!r} holds no SavedModel (no saved_model.pb in "
                          f"{found.folder!r}); give a SavedModel folder, an `export-model` "
                          "folder with --model, or a TF-Hub URL; no kind recognized its files "
                          f"either: tried {'; '.join(tried)}")
    raise ValueError(
        f"{handle!r} fits no encoder kind; tried {'; '.join(tried)}. Found: {found.describe()}. "
        "For a TF2 BERT encoder, give its --preprocessor too")
