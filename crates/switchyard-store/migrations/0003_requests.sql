-- The request log: one row per client request with its routing trace (JSON). Bounded: the
-- writer prunes the oldest rows past a cap, so the file does not grow without end.

CREATE TABLE requests (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    dialect      TEXT    NOT NULL,
    model        TEXT    NOT NULL,
    served_by    TEXT,
    status       INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    trace        TEXT    NOT NULL
) STRICT;
