"""WriteEmbeddings' `store=`: what `beam-embed run --store` does, inside a user's pipeline. The
stores loaded after the run publishes are reached, and their tables made or checked, while
the pipeline is built (before any data is read); the step after the publish upserts the run's
rows into each, keyed by id. A BigQuery table is written by a step of the pipeline itself,
from the batches written."""

from __future__ import annotations

import apache_beam as beam

from beam_embed.pipeline.job.job_stores import check_launch, targets, write_steps


class _LoadStores(beam.DoFn):
    """The published run's rows upserted into each store; yields the folder once loaded."""

    def __init__(self, stores: list, sync: bool, table: str):
        self._stores, self._sync, self._table = stores, sync, table

    def process(self, output: str):
        from beam_embed.pipeline.common.stores.load import load, open_stores
        from beam_embed.pipeline.common.stores.rows import run_rows

        try:
            rows = run_rows(output, None)
            load(rows, open_stores(self._stores, rows.width), sync=self._sync)
        except Exception as e:  # the run is published either way: say how to load it again
            again = (f"beam-embed store {output} {' '.join(t.uri for t in self._stores)}"
                     + (f" --store_table {self._table}" if self._table != "embeddings" else "")
                     + (" --store_sync" if self._sync else ""))
            raise RuntimeError(f"the run is published in {output}, but loading it into the "
                               f"store failed: {str(e).splitlines()[0] if str(e) else type(e)}; "
                               f"load it again with: {again}") from e
        yield output


def with_stores(published, batches, run, schema, options):
    """`published` (the folder, once swapped in) followed by the stores' loading; a ValueError
    now for a store that cannot be reached, or a BigQuery table the run cannot write."""
    from beam_embed.pipeline.common.stores.load import open_stores

    s = run.settings
    if targets(s):
        check_launch(s, options)
        write_steps(batches, run, schema)
    after = targets(s, 1)
    if not after:
        return published
    for store in open_stores(after, run.widths[0][1]):  # reached, its table ready: now
        store.close()
    return published | "LoadStores" >> beam.ParDo(_LoadStores(after, s.store_sync,
                                                              s.store_table))
