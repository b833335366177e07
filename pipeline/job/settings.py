"""RunSettings: the embedding job's settings, each declared once.

Each field is a flag of `beam-embed run` (its help, the values it takes and its check beside it:
pipeline/common/settings/setting_fields.py), a key of `--config FILE.yaml`, and a keyword of a
Python caller: `RunSettings(model="minilm", pooling=["mean", "cls"])`. Constructing one runs every
check that needs neither the model nor TensorFlow; a bad value is a ValueError naming it and what is
expected. What needs I/O (the encoder's spec, the input files, a previous run) is resolved from
it by resolved.py.

A new flag is one field here plus its use. Imports nothing heavy: `--help` is made from it.
"""

from __future__ import annotations

import dataclasses

from beam_embed.models.encoder_choices import (
    ACCELERATORS,
    GRANULARITIES,
    LONG_TEXT_MODES,
    PRECISIONS,
    TOKEN_DTYPES,
    TOKEN_UNITS,
)
from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.rows.vector_dtype_names import VECTOR_DTYPES
from beam_embed.pipeline.common.settings.setting_fields import Settings, flag, positive, setting
from beam_embed.pipeline.job import formats as readers

SPLIT_MODES = ("none", "sentences", "chunks")
MIN_CHUNK_TOKENS = 8  # fewer leaves a window too little text to mean anything
DEFAULT_SHARD_MB = 128  # most engines split Parquet well at 100-250 MB


def input_formats() -> tuple[str, ...]:
    """The formats the job reads: its readers' registry (beam_embed.pipeline.job.formats), read
    when asked."""
    return tuple(readers.READERS)


def _folder(path: str) -> str:
    return path.rstrip("/")


def _shards(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"{flag(name)} must be 0 (the runner decides) or a positive number of "
                         f"shards, got {value}")


def _shard_mb(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{flag(name)} must be a number of megabytes, at least 1 (default "
                         f"{DEFAULT_SHARD_MB}), got {value}")


def _seconds(name: str, value: float) -> None:
    if value < 0:
        raise ValueError(f"{flag(name)} must be 0 (no progress lines) or a positive number of "
                         f"seconds, got {value}")


@dataclasses.dataclass(frozen=True)
class RunSettings(Settings):
    """A run of the embedding job, as given; every value checked on construction."""

    input: tuple[str, ...] = setting(
        (), repeat=True, help="file pattern (repeatable; local, gs://, .gz/.bz2). "
                              "Default: the bundled sample corpus")
    input_format: str | None = setting(
        None, choices=input_formats,
        help="the inputs' format (default: from each file's extension)")
    text_field: str = setting("text", help="JSON/CSV/Parquet/TFRecord field with the text")
    id_field: str | None = setting(
        None, help="field with a stable id (default: a field named id, else path:line)")
    metadata_fields: tuple[str, ...] | None = setting(  # None: from the input (input_fields.py)
        None, help="comma-separated fields carried to the output (default: the input's other "
                   "fields of single values; '' carries none); a field named like a column the "
                   "run writes (source, text, ...) is kept as meta_<field>")
    split: str = setting("none", choices=SPLIT_MODES,
                         help="split documents into sentences (pysbd), or into chunks: "
                              "overlapping windows of --chunk_tokens tokens, one row each")
    chunk_tokens: int | None = setting(
        None, help=f"--split chunks: the most tokens of a window, the model's special tokens not "
                   f"counted ({MIN_CHUNK_TOKENS} to the model's --max_seq_length minus them; "
                   "default: that most)")
    chunk_overlap: int | None = setting(
        None, help="--split chunks: about how many tokens consecutive windows share (0 to "
                   "--chunk_tokens minus 1; default: the smaller of 32 and a quarter of "
                   "--chunk_tokens)")
    clean: bool = setting(True, help="collapse whitespace/NBSP runs and trim")
    max_text_bytes: int = setting(1 << 20, check=positive, help="longer texts are dead-lettered")
    model: str = setting(
        "minilm", help="a preset from configs/models.yaml, an export-model folder, a "
                       "SavedModel (TF-Hub URL, gs:// path or folder) of a recognized kind, or "
                       "a Hugging Face Hub id (ORG/NAME, downloaded and exported once)")
    encoder: str | None = setting(
        None, help="TF-Hub encoder handle (overrides --model); with --preprocessor a BERT pair, "
                   "alone its kind (ELMo, TF1 BERT, text-in) is recognized from the module")
    preprocessor: str | None = setting(
        None, help="TF-Hub preprocessor handle for a BERT --encoder")
    elmo_signature: str = setting(
        "tokens", help="ELMo: `tokens` (words and punctuation split properly) or `default` "
                       "(the module's own split on spaces)")
    granularity: str = setting(
        "sentence", choices=GRANULARITIES,
        help="sentence: one vector per pooling; token: tokens, offsets and one vector per token")
    token_layer: str | None = setting(
        None, help="token vectors from this layer: BERT index (default -1), ELMo output name "
                   "(default elmo)")
    token_unit: str = setting(
        "word", choices=TOKEN_UNITS,
        help="the BERT token unit (word: the mean of its pieces)")
    token_dtype: str = setting(
        "float32", choices=TOKEN_DTYPES,
        help="token vectors in Parquet (float16: half the size)")
    vector_dtype: str = setting(
        "float32", choices=VECTOR_DTYPES,
        help="how sentence vectors are stored (float16: half the size; int8: a quarter, "
             "ranges per dimension in the manifest; binary: one sign bit a dimension)")
    pooling: tuple[str, ...] = setting(
        (), help="comma-separated poolings, e.g. cls,pooled_output,mean,mean@-2 (default: the "
                 "model's recommended)")
    normalize: bool | None = setting(
        None, help="L2-normalize every vector (default: the model's recommendation)")
    max_seq_length: int | None = setting(
        None, check=positive, help="tokens per text incl. [CLS]/[SEP] (default: the model's)")
    truncate_dim: int | None = setting(
        None, check=positive,
        help="keep each vector's first K dimensions (Matryoshka models), normalized again when "
             "the run normalizes; at most the model's width")
    prompt_name: str | None = setting(
        None, metavar="NAME",
        help="prepend the model's prompt of this name (its config_sentence_transformers.json "
             "prompts, e.g. query) to each text; default: the model's default prompt, if any")
    prompt: str | None = setting(
        None, metavar="TEXT",
        help="prepend this text to each text instead (e.g. 'query: '); '' for no prompt, not "
             "even the model's default")
    long_text: str = setting(
        "truncate", choices=LONG_TEXT_MODES,
        help="truncate (flagged) or average overlapping windows")
    batch_tokens: int = setting(16384, check=positive, help="token budget of one inference batch")
    max_batch_size: int = setting(
        512, check=positive, help="most texts in one inference batch, whatever the token budget")
    precision: str | None = setting(
        None, choices=PRECISIONS,
        help="the encoder's compute precision: fp32 exact (the default); bf16 on CPUs with "
             "AMX/AVX-512 bf16, GPUs, TPUs (their default), ~3-4x faster on AMX, cosine to fp32 "
             "> 0.9999; fp16 on GPUs; bf16/fp16 need an export-model encoder")
    accelerator: str = setting(
        "auto", choices=ACCELERATORS,
        help="auto (TensorFlow's placement: a visible GPU, else the CPU), gpu (refused without "
             "one), tpu (this VM's TPU: the encoder XLA-compiled in fixed batch shapes, bf16; "
             "BERT-family exports)")
    output: str = setting("output/embeddings", tidy=_folder, help="output folder (or gs://)")
    format: tuple[str, ...] = setting(
        output_formats.written_by_default(), choices=output_formats.names,  # asked when checked
        help="the formats written")
    num_shards: int = setting(
        0, check=_shards, help="a fixed number of shards per format, written at the end (0: "
                               "shards of at most --shard_mb, each committed as it closes)")
    shard_mb: int = setting(
        DEFAULT_SHARD_MB, check=_shard_mb,
        help="the most megabytes (MiB) a shard holds before the job starts the next one")
    include_text: bool = setting(True, help="write the text beside its vectors")
    dedupe: bool = setting(
        False, help="encode each distinct text once; every record still gets its row")
    reuse: str | None = setting(
        None, metavar="PREVIOUS_OUTPUT", tidy=_folder,
        help="copy the vectors of texts a previous run (local or gs://) embedded with the same "
             "model and settings instead of encoding them")
    store: tuple[str, ...] = setting(
        (), repeat=True, metavar="URI",
        help="after the run publishes, upsert its rows into this vector store (repeatable): "
             "lancedb:///PATH, qdrant:///PATH or qdrant://HOST:PORT, milvus:///FILE.db or "
             "milvus://HOST:PORT, postgresql://... (pgvector); reached before any data is read; "
             "or bigquery://PROJECT.DATASET.TABLE, written by the job itself (Dataflow)")
    store_table: str = setting("embeddings", help="the --store collection or table")
    store_sync: bool = setting(
        False, help="--store also removes the ids the store holds that this run does not")
    overwrite: bool = setting(
        False, help="replace an existing output (swapped in when the new run is complete); "
                    "also takes over the claim a killed run left")
    lance_index: bool = setting(
        False, help="--format lance: build an IVF-PQ index (cosine) on each vector column for "
                    "fast approximate search (default: none, LanceDB searches exactly)")
    resume: bool = setting(
        False, help="continue a run of the same settings and input that was killed in this "
                    "--output: keep the shards it committed, embed only the rest")
    allow_incomplete_input: bool = setting(
        False, help="exit 0 even when an input file is cut short or corrupt (its rest is a dead "
                    "letter either way)")
    progress_every: float = setting(
        5.0, check=_seconds, help="seconds between progress lines on stderr (0: none)")

    def check_together(self) -> None:
        self._check_chunks()
        if self.prompt is not None and self.prompt_name is not None:
            raise ValueError("--prompt and --prompt_name were both given; expected one of them "
                             "(--prompt '' embeds the texts as they are)")
        if self.store:
            from beam_embed.pipeline.common.stores import parse_store_uri

            for uri in self.store:
                if parse_store_uri(uri, self.store_table).scheme == "bigquery" \
                        and self.granularity == "token":
                    raise ValueError(f"--store {uri}: a BigQuery table holds one vector a "
                                     "row; expected --granularity sentence")
                if parse_store_uri(uri, self.store_table).scheme == "bigquery" \
                        and self.resume:  # its load replaces the table with this job's rows
                    raise ValueError(f"--store {uri} with --resume: the job's BigQuery load "
                                     "holds only the rows this attempt embeds, not those kept "
                                     "from the killed run; expected --resume without a "
                                     "bigquery:// --store (then load the table from the "
                                     "published run's Parquet shards)")
        if "lance" in self.format:
            from beam_embed.pipeline.common.output_formats.lance import check_writable

            check_writable(self.output, self.granularity)
        if self.lance_index and ("lance" not in self.format
                                 or self.vector_dtype not in ("float32", "float16")):
            raise ValueError(f"--lance_index indexes the float vectors of --format lance; "
                             f"expected --format with lance and --vector_dtype float32 or "
                             f"float16 (got --format {','.join(self.format)}, --vector_dtype "
                             f"{self.vector_dtype})")
        if self.resume and self.num_shards:
            raise ValueError(f"--resume keeps the shards a killed run committed as they "
                             f"closed, and --num_shards {self.num_shards} writes them all at the "
                             "end (nothing is committed before); expected --num_shards 0 (shards "
                             "of at most --shard_mb) with --resume")
        if self.vector_dtype != "float32" and self.granularity == "token":
            raise ValueError(f"--vector_dtype {self.vector_dtype} applies to sentence vectors; "
                             "token vectors take --token_dtype (float32 or float16)")
        if (self.dedupe or self.reuse) and self.granularity == "token":
            raise ValueError(f"--{'dedupe' if self.dedupe else 'reuse'} applies to sentence "
                             "vectors; expected --granularity sentence")

    def _check_chunks(self) -> None:
        """The chunk flags' own ranges; the largest window the model holds is checked once its
        spec is known (beam_embed.pipeline.job.chunking.check_chunk_tokens)."""
        for name in ("chunk_tokens", "chunk_overlap"):
            if getattr(self, name) is not None and self.split != "chunks":
                raise ValueError(f"{flag(name)} applies to --split chunks, got --split "
                                 f"{self.split}; expected --split chunks or no {flag(name)}")
        if self.split == "chunks" and self.granularity == "token":
            raise ValueError("--split chunks applies to sentence vectors; expected --granularity "
                             "sentence")
        if self.chunk_tokens is not None and self.chunk_tokens < MIN_CHUNK_TOKENS:
            raise ValueError(f"--chunk_tokens {self.chunk_tokens} is too small; expected "
                             f"{MIN_CHUNK_TOKENS} to the model's --max_seq_length minus its "
                             "special tokens")
        if self.chunk_overlap is not None:
            top = f"{self.chunk_tokens - 1}" if self.chunk_tokens else "--chunk_tokens minus 1"
            if self.chunk_overlap < 0 or (self.chunk_tokens is not None
                                          and self.chunk_overlap >= self.chunk_tokens):
                raise ValueError(f"--chunk_overlap {self.chunk_overlap} is out of range; "
                                 f"expected 0 to {top} (less than --chunk_tokens)")

    @property
    def shard_bytes(self) -> int:
        """--shard_mb in bytes: the bound on every file a shard or a dead-letter file holds."""
        return int(self.shard_mb * (1 << 20))

    def encoder_spec(self, threads: tuple[int, int] = (0, 0)):
        """The encoder's checked spec (beam_embed.models.spec.EncoderSpec) for these settings,
        with `threads` (intra-op, inter-op) per worker; may load TensorFlow to recognize a
        model."""
        from beam_embed.models.spec import encoder_spec

        return encoder_spec(
            self.model, encoder=self.encoder, preprocessor=self.preprocessor,
            poolings=self.pooling, normalize=self.normalize, max_seq_length=self.max_seq_length,
            long_text=self.long_text, granularity=self.granularity,
            token_layer=self.token_layer, token_unit=self.token_unit,
            token_dtype=self.token_dtype, precision=self.precision,
            options=(("signature", self.elmo_signature),), threads=threads,
            accelerator=self.accelerator, batch=(self.batch_tokens, self.max_batch_size),
            truncate_dim=self.truncate_dim, prompt_name=self.prompt_name, prompt=self.prompt)
