"""What search needs of a finished run (its manifest, one pooling column, its shards in a format
search reads), the query embedder built from the run's own model settings (checked by
fingerprint), and the blocks of stored vectors to score: from the shards, or from the search
index."""

from __future__ import annotations

import dataclasses

from beam_embed.models.spec import recorded_fingerprint
from beam_embed.pipeline.common import output_formats
from beam_embed.pipeline.common.finished_run.embedding_set import PoolingColumn, load_embedding_set
from beam_embed.pipeline.common.finished_run.shards import CheckedShards, check_shards, unverified
from beam_embed.pipeline.common.output_formats import OutputFormat
from beam_embed.pipeline.common.run_folder.manifest.entries import ModelEntry
from beam_embed.pipeline.search.index import building, index_blocks, open_index
from beam_embed.pipeline.search.scan import vector_blocks
from beam_embed.process.log import log

# The formats' reader search scans with: one vector column at a time straight from the shards
# (beam_embed.pipeline.search.scan), which only a columnar format allows.
READER = "read_column"


@dataclasses.dataclass(frozen=True)
class Corpus:
    """What search needs of a finished run: one pooling column in its shards of `format`."""

    folder: str
    model: ModelEntry
    pooling: PoolingColumn
    shards: list[str]
    has_text: bool
    finished_at: str
    format: OutputFormat  # the shards' format, one search reads
    checked: CheckedShards | None = None  # the shards as checked, re-checked once read
    manifest_sha256: str | None = None  # the run's identity for the search index


def load_corpus(folder: str, pooling: str | None) -> Corpus:
    found = load_embedding_set(folder)
    chosen = found.pooling(pooling)
    fmt = found.first_with(READER)
    if fmt is None:
        searchable = output_formats.readers(READER)
        title = " or ".join(f.title for f in searchable)
        raise ValueError(f"{found.manifest_path} lists no {title} shards (formats "
                         f"{sorted(found.files)}); search reads {title}: rerun the job with "
                         f"--format {searchable[0].name}")
    checked = check_shards(found, fmt.name)  # each there, whole, the file the run wrote
    if not checked.verified:
        log(unverified(found))
    return Corpus(folder, found.model, chosen, list(checked.paths), found.has_text,
                  found.finished_at, fmt, checked, found.manifest_sha256)


def query_handles(corpus: Corpus, model: str | None) -> tuple[str, str, str | None]:
    """(kind, encoder, preprocessor) of the model that embedded the corpus, checked by
    fingerprint: a different model's vectors are not comparable with the stored ones. A
    fingerprint an earlier version recorded (over fewer of the model's files) is accepted, and
    said."""
    from beam_embed.models.presets import resolve

    recorded, m = corpus.model.fingerprint, corpus.model
    if model is not None:
        spec = resolve(model)
        kind, encoder, preprocessor = spec.kind, spec.encoder, spec.preprocessor
    else:
        kind, encoder, preprocessor = m.kind, m.encoder, m.preprocessor
    found = recorded_fingerprint(recorded, kind, encoder, preprocessor, m.encoder)
    if not found.same and model is not None:
        raise ValueError(
            f"--model {model!r} is {spec.name} (fingerprint {found.now}), but {corpus.folder} "
            f"was embedded with {m.name} (fingerprint {recorded}); a query must be embedded "
            "with the model of the stored vectors")
    if not found.same:
        from beam_embed.pipeline.common.finished_run.rows_agree import rows_agree

        note = rows_agree(m, corpus.pooling, corpus.has_text, corpus.shards[0], corpus.format,
                          kind, encoder, preprocessor) if corpus.shards else None
        if note is not None:
            log(f"{corpus.folder}: {note}")
            return kind, encoder, preprocessor
        raise ValueError(
            f"the model {m.name} at {m.encoder!r} is missing or changed since "
            f"{corpus.folder} was embedded (fingerprint {found.now}, manifest {recorded}); pass "
            f"--model with the model it was embedded with{_presets_named(m.name)}")
    if found.earlier:
        log(f"{corpus.folder}: {found.note}")
    return kind, encoder, preprocessor


def _presets_named(name: str | None) -> str:
    """The presets of the model `name`, as a hint: a checkpoint preset is exported again into
    the cache on first use (after `beam-embed cache clear`, or on another machine)."""
    from beam_embed.models.presets import load_presets

    try:
        found = [k for k, p in load_presets().items() if p.get("name", k) == name]
    except (OSError, ValueError):
        return ""
    return f" (e.g. --model {found[0]}: a preset is exported again on first use)" if found else ""


def build_embedder(corpus: Corpus, model: str | None):
    """The run's own encoder settings, for embedding queries; with the model's query prompt
    when it has one (as sentence-transformers' encode_query), said in one line."""
    from beam_embed.models.spec import encoder_spec

    kind, encoder, preprocessor = query_handles(corpus, model)
    p, m = corpus.pooling, corpus.model
    prompt, said = query_prompt(m.name, encoder)
    spec = encoder_spec(encoder=encoder, preprocessor=preprocessor, kind=kind,
                        max_seq_length=m.max_seq_length, poolings=(p.name,),
                        normalize=p.normalize, long_text=m.long_text or "truncate",
                        name=m.name, truncate_dim=m.truncate_dim, **prompt)
    log(said)
    return spec.build()


def query_prompt(name: str | None, encoder: str) -> tuple[dict, str]:
    """The prompt keywords for embedding queries with the model at `encoder`, and the line
    saying which: its prompt named "query" when it has a non-empty one, else none (not its
    default prompt, which sentence-transformers' encode_query does not apply either)."""
    from beam_embed.models.presets import card_prompts
    from beam_embed.models.prompts import QUERY, recorded_prompts

    recorded = recorded_prompts(encoder)
    prompts = card_prompts(name, recorded)
    text = prompts.named(QUERY)
    if text and prompts.include_prompt:
        # a preset's prompt the export does not record goes as the literal text it is
        given = {"prompt_name": QUERY} if recorded.named(QUERY) == text else {"prompt": text}
        return given, f"queries embedded with the model's prompt {QUERY!r} ({text!r})"
    why = (f"its prompt {QUERY!r} would be left out of its Pooling's mean (include_prompt "
           "false), which is not reproduced" if text else
           f"{name} has no prompt named {QUERY!r}")
    return {"prompt": ""}, f"queries embedded without a prompt ({why})"


def blocks(corpus: Corpus, use_index: bool, block_rows: int):
    """(vector blocks in scan order, where they come from, for the log line)."""
    p, title = corpus.pooling, corpus.format.title
    if not use_index:
        return (vector_blocks(corpus.format, corpus.shards, p.column, p.width, block_rows,
                              p.stored()), f"{len(corpus.shards)} {title} shard(s)")
    index = open_index(corpus)
    if index is None:
        return building(corpus, block_rows), f"{title}, building the search index"
    return index_blocks(index, block_rows), "the search index"
