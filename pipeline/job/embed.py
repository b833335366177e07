"""EmbedRecords: length-sorted batches -> TagBundles -> RunInference(EncoderHandler) -> EmbeddedBatch.

Batching: Beam's SortAndBatchElements (bounded to windows of records, beam_embed.pipeline.job.batching) sorts
by estimated token count and cuts batches under a token budget; the encoder packs each batch in
groups of near-equal length. RunInference then sees one pre-formed batch per element (its own
BatchElements is pinned to 1), which keeps Beam's model loading/sharing and metrics while the
batch shapes stay ours. The handler keeps batches in flight (encoding them on a background thread
while the worker reads and writes); `_TagBundles` marks each bundle's end so the last ones are
returned within their bundle.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
import numpy as np
from apache_beam.ml.inference.base import ModelHandler, RunInference

from beam_embed.models.spec import EncoderSpec
from beam_embed.models.tf_import import import_tensorflow
from beam_embed.pipeline.common.rows.records import DeadLetter, EmbeddedBatch, Record
from beam_embed.pipeline.common.runners.dask.progress import tell as tell_launcher
from beam_embed.pipeline.job.batching import SortAndBatchWindows
from beam_embed.pipeline.job.sources import NAMESPACE
from beam_embed.pipeline.job.threads import worker_threads
from beam_embed.process.log import library_quiet_wanted, log
from beam_embed.process.private_apis.beam import bundle_output


def estimated_tokens(record: Record, prompt_chars: int = 0) -> int:
    """Cheap length estimate for sorting/budgeting: WordPiece runs ~1.3 pieces per word;
    `prompt_chars`: the prompt the encoder prepends to every text."""
    return 2 + (len(record.text) + prompt_chars + 3) // 4


class _Progress:
    """Progress lines on stderr. The percentage compares the records (input rows) this worker
    embedded with its share of the records the launcher expects the input to hold
    (beam_embed.pipeline.job.input_size): an estimate, left out when there is none."""

    def __init__(self, every_s: float, share: float):
        self._every = every_s
        self._share = share
        self._start = self._last = time.monotonic()
        self._done = 0

    def add(self, records: list[Record]) -> None:
        added = sum(r.row_count() for r in records)  # --dedupe: each text's rows
        self._done += added
        tell_launcher(added)  # a Dask worker's count, for the launcher's line
        now = time.monotonic()
        if self._every <= 0 or now - self._last < self._every:
            return
        self._last = now
        elapsed = max(now - self._start, 1e-9)
        line = f"worker {os.getpid()}: {self._done} records embedded, {self._done / elapsed:.0f}/s"
        if self._share > 0:
            fraction = min(self._done / self._share, 1.0)
            eta = elapsed * (1 - fraction) / max(fraction, 1e-9)
            line += f", ~{100 * fraction:.0f}% of input, ETA ~{eta:.0f}s"
        log(line)


@dataclasses.dataclass(frozen=True)
class BundleBatch:
    """A batch of records tagged with the bundle it came in (see EncoderHandler)."""

    bundle: str
    records: tuple[Record, ...]


@dataclasses.dataclass(frozen=True)
class BundleEnd:
    """Emitted after a bundle's last batch: flushes the batch the handler still has in flight."""

    bundle: str


class _TagBundles(beam.DoFn):
    """Tags each batch with its bundle and ends every bundle with a BundleEnd. Fused with
    RunInference (no shuffle between them), so the marker reaches the same DoFn instance after
    the bundle's batches, in order."""

    def start_bundle(self):
        self._bundle = uuid.uuid4().hex

    def process(self, batch):
        yield BundleBatch(self._bundle, tuple(batch))

    def finish_bundle(self):
        yield bundle_output(BundleEnd(self._bundle))


class EncoderHandler(ModelHandler[Sequence[Record], object, object]):
    """A ModelHandler whose example is one length-sorted batch of Records.

    Batches in flight: RunInference calls `run_inference` synchronously, so the encoder would
    sit idle while the worker reads, batches and writes (measured: a fifth of the job on 2 cores).
    Given a BundleBatch, the handler queues it for a background thread (one batch encodes at a
    time) and returns the results of the batches that finished, waiting only while `in_flight`
    batches are queued; the BundleEnd that `_TagBundles` emits at the end of each bundle returns
    the rest. Two in flight, not one: when a sort window is cut, the worker reads the next
    window (~0.8 s for 16,384 records on 2 cores) while the queue drains, and one batch (~0.4 s)
    left the encoder idle for the difference. Batches left in flight by a bundle that failed
    (their bundle id differs) are dropped: the runner retries that bundle. Plain batches (no
    tag) are encoded at once."""

    def __init__(self, spec: EncoderSpec, progress_every_s: float = 5.0,
                 share: float = 0.0, in_flight: int = 2, library: bool = False,
                 fingerprint: str | None = None):
        super().__init__()
        self._spec = spec
        self._library = library  # in a library caller's pipeline (EmbedTexts), not a command's
        self._fingerprint = fingerprint  # the run's: the model a worker loads must have it
        self._progress_every = progress_every_s
        self._share = share  # the records this worker is expected to embed (0: unknown)
        self._in_flight = max(1, in_flight)
        self._progress = None
        self._pending = collections.deque()  # (BundleBatch, Future), oldest first
        self._pool = None

    def load_model(self):
        from beam_embed.pipeline.common.runners.dask.probe import check_loaded

        check_loaded(self._spec, self._fingerprint)  # another copy of the model at the path
        # local worker processes inherit the launcher's quiet setting; a library caller's
        # pipeline has none, and TensorFlow is quiet there unless the user asks for its lines
        import_tensorflow(library_quiet_wanted() if self._library else None)
        return self._spec_here().build()

    def _spec_here(self) -> EncoderSpec:
        """The spec, its TensorFlow pools sized on a Dask worker to the worker's share of its
        machine's cores (the launcher leaves them to TF's defaults: it cannot know them)."""
        from beam_embed.pipeline.common.runners.dask.cores import worker_cores

        cores = worker_cores()
        if not cores:
            return self._spec
        intra, inter = worker_threads(dask_worker_cores=cores)
        return dataclasses.replace(self._spec, intra_op_threads=intra, inter_op_threads=inter)

    def batch_elements_kwargs(self):
        return {"min_batch_size": 1, "max_batch_size": 1}

    def share_model_across_processes(self) -> bool:
        return False

    def get_num_bytes(self, batch) -> int:
        """Text bytes (Beam's default pickles the whole batch on every call)."""
        items = [b.records if isinstance(b, BundleBatch) else b for b in batch
                 if not isinstance(b, BundleEnd)]
        return sum(len(r.text) for records in items for r in records)

    def run_inference(self, batch, model, inference_args=None):
        if self._progress is None:
            self._progress = _Progress(self._progress_every, self._share)
        outputs = []
        for item in batch:
            if isinstance(item, BundleEnd):
                outputs += self._finish(item.bundle, keep=0)
            elif isinstance(item, BundleBatch):
                outputs += self._finish(item.bundle, keep=self._in_flight - 1)
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1, thread_name_prefix="encoder-inflight")
                self._pending.append(
                    (item, self._pool.submit(_embed, list(item.records), model)))
            else:
                outputs += self._done(list(item), _embed(list(item), model))
        return outputs

    def _finish(self, bundle: str, keep: int) -> list:
        """Results of the queued batches of `bundle`, oldest first: those already done, and
        as many more as it takes to leave at most `keep` queued."""
        out = []
        while self._pending:
            item, future = self._pending[0]
            if item.bundle == bundle and len(self._pending) <= keep and not future.done():
                break
            self._pending.popleft()
            result = future.result()
            if item.bundle != bundle:
                log(f"dropped {len(item.records)} records left in flight by an unfinished "
                    "bundle (the runner retries it)")
                continue
            out += self._done(item.records, result)
        return out

    def _done(self, records, out: list) -> list:
        """Counts (Beam metrics only count on the bundle's thread) and progress."""
        counters = beam.metrics.Metrics
        for o in out:
            if isinstance(o, EmbeddedBatch):  # a --dedupe text counts for each of its rows
                rows = np.array([r.row_count() for r in o.records])
                counters.counter(NAMESPACE, "embedded").inc(int(rows.sum()))
                counters.counter(NAMESPACE, "truncated").inc(int(rows[o.truncated].sum()))
                counters.counter(NAMESPACE, "tokens").inc(int((o.num_tokens * rows).sum()))
        self._progress.add(records)
        return out

    def get_metrics_namespace(self) -> str:
        return NAMESPACE


def _embed(records: list[Record], model) -> list:
    """[EmbeddedBatch], or the batch record by record when it fails as a whole: the records
    that still fail become dead letters."""
    try:
        return [_embedded(records, model.embed([r.text for r in records]))]
    except Exception:  # noqa: BLE001 - isolate the record(s) that broke the batch
        pass
    out = []
    for record in records:
        try:
            out.append(_embedded([record], model.embed([record.text])))
        except Exception as e:  # noqa: BLE001 - any failure becomes a dead letter
            reason = f"encoder failed: {type(e).__name__}: {e}"
            out += [DeadLetter.of(r.id, r.source, reason, r.text) for r in record.rows()]
    return out


def _embedded(records: list[Record], result) -> EmbeddedBatch:
    """The batch's rows, one a record; a text encoded once for several records (--dedupe's
    DistinctText) is one row here, given to each of them after (incremental.copied_rows)."""
    from beam_embed.models.tokens import TokenVectors

    token_level = isinstance(result, TokenVectors)
    return EmbeddedBatch(records=tuple(records), vectors={} if token_level else result.vectors,
                         num_tokens=result.num_tokens, truncated=result.truncated,
                         tokens=result if token_level else None)


class _Split(beam.DoFn):
    def process(self, item):
        if isinstance(item, DeadLetter):
            beam.metrics.Metrics.counter(NAMESPACE, "dead_lettered").inc()
            yield beam.pvalue.TaggedOutput("dead", item)
        else:
            yield item


class EmbedRecords(beam.PTransform):
    """Outputs `batches` (EmbeddedBatch) and `dead` (records the encoder could not take)."""

    def __init__(self, spec: EncoderSpec, batch_tokens: int = 16384, max_batch_size: int = 512,
                 progress_every_s: float = 5.0, share: float = 0.0, library: bool = False,
                 fingerprint: str | None = None):
        super().__init__()
        self._share = share
        self._library = library
        self._fingerprint = fingerprint
        self._spec = spec
        self._batch_tokens = batch_tokens
        self._max_batch_size = max_batch_size
        self._progress = progress_every_s

    def expand(self, records):
        results = (records
                   | "SortAndBatch" >> SortAndBatchWindows(
                       min_batch_size=1, max_batch_size=self._max_batch_size,
                       max_batch_weight=self._batch_tokens,
                       element_size_fn=functools.partial(estimated_tokens,
                                                         prompt_chars=len(self._spec.prompt)))
                   | "TagBundles" >> beam.ParDo(_TagBundles())
                   | "RunInference" >> RunInference(
                       EncoderHandler(self._spec, self._progress, self._share,
                                      library=self._library, fingerprint=self._fingerprint))
                   | "SplitResults" >> beam.ParDo(_Split()).with_outputs("dead", main="batches"))
        return {"batches": results.batches, "dead": results.dead}
