-- Usage aggregates (issue 18): per UTC hour, local key, combo, provider and model, the sums of
-- the request-log entries of that hour. Rows are upserted in the same transaction as the
-- entries they summarise, so after any crash the aggregates equal those entries summed.
-- Empty text stands for "not applicable" (no key, no route, not served): a primary key
-- column cannot hold NULL usefully. `ttft` is the time-to-first-token sketch as
-- `bucket:count` pairs (switchyard_core::usage::sketch).

ALTER TABLE requests ADD COLUMN local_key TEXT;
ALTER TABLE requests ADD COLUMN combo TEXT;
ALTER TABLE requests ADD COLUMN fallback INTEGER NOT NULL DEFAULT 0;

CREATE TABLE usage (
    hour                  INTEGER NOT NULL,
    local_key             TEXT    NOT NULL,
    combo                 TEXT    NOT NULL,
    provider              TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    requests              INTEGER NOT NULL,
    fallbacks             INTEGER NOT NULL,
    errors                INTEGER NOT NULL,
    uncached_input_tokens INTEGER NOT NULL,
    cache_read_tokens     INTEGER NOT NULL,
    cache_write_tokens    INTEGER NOT NULL,
    output_tokens         INTEGER NOT NULL,
    reasoning_tokens      INTEGER NOT NULL,
    estimated             INTEGER NOT NULL,
    cost_nanodollars      INTEGER NOT NULL,
    cost_unknown          INTEGER NOT NULL,
    ttft                  TEXT    NOT NULL,
    PRIMARY KEY (hour, local_key, combo, provider, model)
) STRICT, WITHOUT ROWID;
