"""A TF-Hub BERT encoder + preprocessor pair behind one small interface.

Works for TF-Hub's own models (`bert_en_uncased_L-12_H-768_A-12/4` with
`bert_en_uncased_preprocess/3`) and for `export-model` output alike: only the TF-Hub BERT
encoder and preprocessor contracts are used. Loaded once; every batch goes through the same loaded graphs.
"""

from __future__ import annotations

import functools
import json
import logging
import os

import numpy as np
import tensorflow as tf

from beam_embed.models import accelerators, cpu
from beam_embed.models.dense_head import DenseHead
from beam_embed.models.encoder import Encoder, Units, WordPieces, Words
from beam_embed.models.encoder_choices import PRECISIONS
from beam_embed.models.encoders import encoder_kind
from beam_embed.models.export_format import METADATA_FILE, precision_folder
from beam_embed.models.fixed_shapes import bucket_length
from beam_embed.models.gcs_copy import local_copy
from beam_embed.models.hub_loader import downloads, load_once, resolve_handle
from beam_embed.models.pooling import EncoderOutput
from beam_embed.models.warm_up import wait as wait_for_warm_up
from beam_embed.models.xla import CompiledForward

# BERT groups (see HubBertEncoder.plan) use finer lengths: 2-token steps where short texts live.
GROUP_BUCKETS = (*range(4, 33, 2), *range(36, 65, 4), *range(72, 129, 8), *range(144, 257, 16),
                 *range(288, 513, 32))
SPECIAL_TOKENS_PER_TEXT = 2  # [CLS] ... [SEP]
PROBE_LENGTH = 4  # the one call that learns an encoder's layers and width: [CLS] 1 2 [SEP]
# The plan's cost model, in padded tokens (measured with bf16 MiniLM on 2 AMX cores; both scale
# with the machine like the per-token cost does): one more encoder call costs ~7 ms (~200 tokens),
# a (rows, length) shape not seen before ~15 ms more (oneDNN creates its kernels per shape).
GROUP_ROWS = 8  # groups are cut on multiples of 8 rows: few distinct shapes
CALL_COST_TOKENS = 200
NEW_SHAPE_COST_TOKENS = 400
# Each distinct shape keeps ~1.5 MB of oneDNN kernels and primitives alive for the life of the
# process (measured: RSS grew 200 MB over 200,000 sentences and 193 shapes, and stayed flat when
# the same shapes repeated). Past this many, a group runs in the cheapest shape already made that
# holds it (extra rows are empty texts), so memory stays flat however long the job runs.
MAX_SHAPES = 64


def precision_handle(encoder: str, precision: str) -> str:
    """The SavedModel that computes `precision`: an export's own folder for it beside the
    encoder (`encoder_bf16/`, export format 5), else the encoder itself (older exports keep
    every precision's function in `encoder/`; TF-Hub's own encoders compute in fp32)."""
    if precision == "fp32" or downloads(encoder):
        return encoder
    folder = precision_folder(encoder, precision)
    return folder if tf.io.gfile.exists(local_copy(os.path.join(folder, "saved_model.pb"))) \
        else encoder


def load_pair(encoder: str, preprocessor: str, precision: str = "fp32"):
    """(preprocessor, encoder computing `precision`) SavedModels, each loaded once per process;
    a warm-up of the encoder under way (models/warm_up.py) finishes first."""
    wait_for_warm_up(encoder, precision, loaded_only=True)
    loaded = load_once(preprocessor)
    wait_for_warm_up(encoder, precision)
    return loaded, load_once(precision_handle(encoder, precision))


def _forward(encoder, handle: str, precision: str, own: bool):
    """select_precision without its warnings (see there)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {list(PRECISIONS)}")
    fn = encoder if own else getattr(encoder, precision, None)
    if precision == "fp32":
        return fn if callable(fn) else encoder
    if fn is None or not callable(fn):
        raise ValueError(
            f"precision {precision!r} needs an encoder exported by `beam-embed export-model` "
            f"(export format 3 or later); {handle!r} computes in fp32 only (TF-Hub's own BERT "
            f"SavedModels have no {precision} path). Use --precision fp32, or export the "
            "checkpoint (or re-export an older export) with `beam-embed export-model`")
    return fn


def select_precision(encoder, handle: str, precision: str, own: bool = False,
                     on_cpu: bool = True):
    """The loaded encoder's function for `precision`: a precision's own SavedModel (`own`:
    `handle` is the `encoder_bf16/` precision_handle found) is its call; otherwise the fused functions `export-model` added to
    the encoder (`fp32`; `bf16`, `fp16` in export formats 3-4; see models/export/bert_encoder.py), else,
    for fp32, the contract's own call. TF-Hub's own BERT SavedModels have only that call:
    asking them for less than fp32 fails here, before any data is read. A low precision without
    the hardware for it is run, with a warning (`on_cpu`: where no accelerator was asked for)."""
    fn = _forward(encoder, handle, precision, own)
    if precision != "fp32" and on_cpu and not tf.config.list_physical_devices("GPU"):
        flags = cpu.cpu_flags()
        if precision == "fp16":
            _warn_once("--precision fp16 without a GPU: CPUs have no fast float16 matmul here; "
                       "bf16 is the fast CPU precision (AMX/AVX-512 bf16)")
        elif flags and not cpu.has_fast_bf16(flags):
            _warn_once(f"--precision bf16 on a CPU without {' or '.join(cpu.FAST_BF16_FLAGS)}: "
                       "bf16 is emulated here, no faster than fp32 and less exact; fp32 is the "
                       "fast precision on this CPU")
    return fn


@functools.cache  # a process loads its model twice (the launcher's check, the worker's)
def _warn_once(message: str) -> None:
    logging.getLogger(__name__).warning(message)


def export_metadata(encoder: str) -> dict:
    """The beam_embed.json of the export `encoder` is in, else {} (a TF-Hub encoder)."""
    meta = local_copy(os.path.join(os.path.dirname(encoder.rstrip("/")), METADATA_FILE))
    if not tf.io.gfile.exists(meta):
        return {}
    with tf.io.gfile.GFile(meta) as f:
        return json.load(f)


class HubBertEncoder(Encoder):
    kind = "bert"
    special_tokens = SPECIAL_TOKENS_PER_TEXT
    plans = True
    warms_up = True

    def __init__(self, encoder: str, preprocessor: str, max_seq_length: int = 512,
                 precision: str = "fp32", accelerator: str = "auto", on_host: bool = False,
                 batch: tuple[int, int] = (16384, 512)):
        """`accelerator` tpu: XLA-compiled calls in fixed shapes (`batch`: the token budget and
        the most rows of one call) under the TPU's strategy, or, `on_host`, the default
        strategy on this machine's CPU (models/accelerators.py)."""
        strategy = accelerators.strategy(accelerator, on_host)  # no device: refused before loading
        preprocessor_model, encoder_model = load_pair(encoder, preprocessor, precision)
        self.precision = precision
        handle = precision_handle(encoder, precision)
        forward = select_precision(encoder_model, handle, precision, own=handle != encoder,
                                   on_cpu=accelerator == "auto")
        with tf.device(accelerators.HOST if accelerator == "tpu" else None):  # the probe's call
            self._setup(preprocessor_model, forward, max_seq_length)
        self.head = DenseHead.of_export(os.path.dirname(encoder.rstrip("/")),
                                        export_metadata(encoder))
        if accelerator == "tpu":
            self._compiled = CompiledForward(forward, strategy)
            self.fixed_shapes = encoder_kind(self.kind).fixed_shapes(*batch, self.max_seq_length)
            self.parallel_calls = False  # one device runs one program at a time

    def _setup(self, preprocessor, forward, max_seq_length: int) -> None:
        """What every encoder of the TF-Hub BERT contracts shares: `preprocessor` tokenizes
        (`tokenize`, `tokenize_with_offsets`, `bert_pack_inputs` or [CLS]/[SEP]/[PAD] ids),
        `forward(packed inputs)` returns `sequence_output`, `pooled_output` and
        `encoder_outputs` (the layers it exposes, last one last)."""
        self._preprocessor = preprocessor
        self._forward = forward
        self._compiled = None  # a CompiledForward when the calls run XLA-compiled
        self.fixed_shapes = None  # FixedShapes when every call runs in one of a few shapes
        self.max_seq_length = max_seq_length
        self._vocab = None
        self._shapes: set[tuple[int, int]] = set()  # (rows, length) the encoder has run
        self._fits: dict[tuple[int, int], tuple[int, int] | None] = {}
        self._cls, self._sep, self._pad = self._special_ids()
        probe = self._run(Units(np.array([1, 2], np.int32), np.array([2])), PROBE_LENGTH)
        self.num_layers = len(probe["encoder_outputs"])
        self.width = int(probe["sequence_output"].shape[-1])

    @classmethod
    def from_spec(cls, spec) -> HubBertEncoder:
        return cls(spec.encoder, spec.preprocessor, spec.max_seq_length, spec.precision,
                   spec.accelerator, spec.on_host, (spec.batch_tokens, spec.max_batch_size))

    @property
    def compilations(self) -> int:
        """XLA programs compiled so far (0 when the calls are not compiled)."""
        return self._compiled.compilations if self._compiled else 0

    @classmethod
    def max_positions(cls, spec) -> int | None:
        """An export records its positions in beam_embed.json; another SavedModel has them as
        its position embedding variable's rows."""
        recorded = export_metadata(spec.encoder).get("max_position_embeddings")
        return int(recorded) if recorded else super().max_positions(spec)

    @classmethod
    def warm_up(cls, spec, loaded) -> None:
        """The encoder's load and its graph's first call, in the shape `_setup`'s probe runs."""
        handle = precision_handle(spec.encoder, spec.precision)
        forward = _forward(load_once(handle), handle, spec.precision, handle != spec.encoder)
        loaded()
        ones = tf.ones([1, PROBE_LENGTH], tf.int32)
        forward({"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones * 0})

    @classmethod
    def wordpieces(cls, spec) -> WordPieces:
        """The preprocessor alone, and the vocab.txt asset that ships inside it."""
        path = os.path.join(resolve_handle(spec.preprocessor), "assets", "vocab.txt")
        if not tf.io.gfile.exists(path):
            raise ValueError(f"preprocessor {spec.preprocessor!r} has no assets/vocab.txt; "
                             "tokens needs a WordPiece (BERT-family) preprocessor")
        with tf.io.gfile.GFile(path) as f:
            vocab = tuple(line.rstrip("\n") for line in f)
        return WordPieces(vocab, load_once(spec.preprocessor))

    def tokenize(self, texts: list[str]) -> Units:
        """WordPiece ids per text, without [CLS]/[SEP]. On the host CPU, pinned: an accelerator
        runs the encoder only."""
        with tf.device(accelerators.HOST):
            tokens = self._preprocessor.tokenize(tf.constant(texts, dtype=tf.string))
        return Units.of(tokens.merge_dims(-2, -1) if tokens.ragged_rank == 2 else tokens)

    def tokenize_with_offsets(self, texts: list[str]) -> Words:
        """Each word's pieces, with the word's byte span in the original text."""
        if not hasattr(self._preprocessor, "tokenize_with_offsets"):
            raise ValueError("this preprocessor has no tokenize_with_offsets; token-level output "
                             "needs an export made by `beam-embed export-model`")
        out = self._preprocessor.tokenize_with_offsets(tf.constant(texts, dtype=tf.string))
        return Words.of(out["pieces"], out["word_begin"], out["word_end"])

    def vocabulary(self) -> list[str]:
        """id -> piece string, from the vocab file saved inside the preprocessor."""
        if self._vocab is None:
            path = self._preprocessor.vocab_file.asset_path.numpy().decode()
            with tf.io.gfile.GFile(path) as f:
                self._vocab = [line.rstrip("\n") for line in f]
        return self._vocab

    def _special_ids(self) -> tuple[int, int, int]:
        """[CLS], [SEP] and [PAD] ids: an export-model preprocessor keeps them as variables;
        others are asked once through the contract's own packer."""
        ours = [getattr(self._preprocessor, f"{k}_id", None) for k in ("cls", "sep", "pad")]
        if all(isinstance(v, tf.Variable) for v in ours):
            return tuple(int(v.numpy()) for v in ours)
        one = tf.RaggedTensor.from_row_splits(tf.ragged.constant([[7]], dtype=tf.int32),
                                              tf.constant([0, 1], tf.int64))
        ids = self._preprocessor.bert_pack_inputs([one], seq_length=tf.constant(4))
        cls, _, sep, pad = ids["input_word_ids"].numpy()[0].tolist()
        return cls, sep, pad

    def pack(self, pieces: Units, seq_length: int,
             rows: int | None = None) -> dict[str, np.ndarray]:
        """`bert_pack_inputs([pieces], seq_length)` for one segment, in numpy: [CLS] pieces
        [SEP], padded; `rows` > the number of texts adds empty texts ([CLS] [SEP]) after them.
        (The restored packer costs ~180 ms the first time it sees each new number of rows,
        which the job's varying batch sizes keep hitting.)"""
        values = pieces.values.astype(np.int32, copy=False)
        splits = pieces.splits
        lengths = pieces.lengths
        if rows is not None and rows > len(lengths):
            lengths = np.concatenate([lengths, np.zeros(rows - len(lengths), lengths.dtype)])
            splits = np.concatenate([splits, np.full(rows - len(splits) + 1, splits[-1])])
        rows = len(lengths)
        kept = np.minimum(lengths, seq_length - SPECIAL_TOKENS_PER_TEXT)
        row = np.repeat(np.arange(rows), lengths)
        col = np.arange(len(values)) - np.repeat(splits[:-1], lengths)
        keep = col < kept[row]
        ids = np.full((rows, seq_length), self._pad, np.int32)
        ids[:, 0] = self._cls
        ids[row[keep], col[keep] + 1] = values[keep]
        ids[np.arange(rows), kept + 1] = self._sep
        mask = (np.arange(seq_length)[None, :] < (kept + SPECIAL_TOKENS_PER_TEXT)[:, None])
        return {"input_word_ids": ids, "input_mask": mask.astype(np.int32),
                "input_type_ids": np.zeros_like(ids)}

    def _run(self, pieces: Units, seq_length: int, rows: int | None = None,
             layers: tuple[int, ...] | None = None) -> dict:
        """The encoder's outputs for `pieces` packed to rows x seq_length; compiled (only
        `layers` of encoder_outputs, keyed by layer) when the calls are, else the graph's
        call, placed by TensorFlow (every layer)."""
        packed = self.pack(pieces, seq_length, rows)
        if self._compiled is not None and layers is not None:
            out = self._compiled(packed, layers)
        else:
            out = self._forward(packed)
        return {**out, "input_mask": packed["input_mask"]}

    def _length(self, pieces: int) -> int:
        return bucket_length(pieces + SPECIAL_TOKENS_PER_TEXT, self.max_seq_length, GROUP_BUCKETS)

    def _fit(self, rows: int, length: int) -> tuple[int, int] | None:
        """The cheapest shape already made that holds rows x length, if any."""
        key = (rows, length)
        if key not in self._fits:
            fits = [(r * n, (r, n)) for r, n in self._shapes if r >= rows and n >= length]
            self._fits[key] = min(fits)[1] if fits else None
        return self._fits[key]

    def _shape_cost(self, rows: int, length: int) -> tuple[int, tuple[int, int]]:
        """(cost in padded tokens, shape to run) for a group of rows x length."""
        if (rows, length) in self._shapes:
            return rows * length + CALL_COST_TOKENS, (rows, length)
        fit = self._fit(rows, length)
        options = []
        if fit is not None:
            options.append((fit[0] * fit[1] + CALL_COST_TOKENS, fit))
        if fit is None or len(self._shapes) < MAX_SHAPES:
            options.append((rows * length + CALL_COST_TOKENS + NEW_SHAPE_COST_TOKENS,
                            (rows, length)))
        return min(options)

    def plan(self, lengths: np.ndarray, min_groups: int = 1) -> list[tuple[np.ndarray, tuple]]:
        """The groups to encode one by one, for a batch whose rows have `lengths` pieces: (row
        indices, (rows, length) shape to run them in). The rows are sorted by their exact length
        and cut (on multiples of GROUP_ROWS) where the padding saved outweighs one more call;
        each group is packed to its own length. The batches arrive sorted by an estimate of
        their length (the job sorts before tokenizing); this is where the exact lengths are
        known. Dynamic programming over the cut points; shapes run before cost less (their
        kernels exist), and past MAX_SHAPES only those are used. `min_groups=2` asks for two
        groups when the batch has 2 * GROUP_ROWS rows or more (two encoder calls can run at
        once). With fixed shapes, their plan instead (models/fixed_shapes.py)."""
        lengths = np.asarray(lengths)
        if self.fixed_shapes is not None:
            return self.fixed_shapes.plan(
                np.minimum(lengths + SPECIAL_TOKENS_PER_TEXT, self.max_seq_length))
        n = len(lengths)
        order = np.argsort(lengths, kind="stable")
        seq = [self._length(int(k)) for k in lengths[order]] or [self._length(0)]
        ends = [*range(GROUP_ROWS, n, GROUP_ROWS), n] if n else [0]
        best = {0: (0, 0, None)}  # group end -> (cost up to it, start of its group, its shape)
        for j in ends[n == 0:]:
            best[j] = min((best[i][0] + cost, i, shape)
                          for i in (0, *ends) if i < j
                          for cost, shape in [self._shape_cost(j - i, seq[j - 1])])
        if n == 0:
            return [(order, self._shape_cost(0, seq[0])[1])]
        if min_groups > 1 and best[n][1] == 0 and n >= 2 * GROUP_ROWS:
            # the cheapest single cut instead (j is a multiple of GROUP_ROWS: not the last end)
            best[n] = min((best[j][0] + cost, j, shape) for j in ends[:-1]
                          for cost, shape in [self._shape_cost(n - j, seq[n - 1])])
        groups, j = [], n
        while j > 0:
            _, i, shape = best[j]
            groups.append((order[i:j], shape))
            j = i
        return groups[::-1]

    def encode(self, pieces: Units, layers: tuple[int, ...],
               shape: tuple[int, int] | None = None) -> EncoderOutput:
        """Runs the encoder on already-tokenized, already-short-enough rows; in `shape` (rows,
        length; from `plan`) when given, else packed to their own (bucketed) longest length."""
        rows = len(pieces)
        longest = int(pieces.lengths.max()) if rows else 0
        if shape is None and self.fixed_shapes is not None:
            length = self.fixed_shapes.length(longest + SPECIAL_TOKENS_PER_TEXT)
            shape = (self.fixed_shapes.rows(length), length)
        run_rows, seq_length = shape or (rows, self._length(longest))
        if run_rows < rows or seq_length < min(longest + SPECIAL_TOKENS_PER_TEXT,
                                               self.max_seq_length):
            raise ValueError(f"shape {shape} cannot hold {rows} rows of up to {longest} pieces")
        if (run_rows, seq_length) not in self._shapes:
            self._shapes.add((run_rows, seq_length))
            self._fits.clear()
        out = self._run(pieces, seq_length, run_rows, layers)
        all_layers = out["encoder_outputs"]  # rows past `rows` are padding: dropped here
        return EncoderOutput(
            layers={k: all_layers[k].numpy()[:rows] for k in layers},
            mask=out["input_mask"][:rows].astype(np.float32),
            pooled={"pooled_output": out["pooled_output"].numpy()[:rows]},
        )
