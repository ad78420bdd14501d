-- The three resilience layers (RESILIENCE.md §6) and the settings sections.
--
-- Timestamps are INTEGER unix milliseconds, enums their serde snake_case names. A row exists only
-- for an entry the registry tracks: an entry back to pristine is deleted, not zeroed.

CREATE TABLE breakers (
    provider    TEXT    NOT NULL PRIMARY KEY,
    state       TEXT    NOT NULL,
    failures    INTEGER NOT NULL,
    reopens     INTEGER NOT NULL,
    open_until  INTEGER,
    last_fault  TEXT,
    changed_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE credential_cooldowns (
    provider       TEXT    NOT NULL,
    credential     TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    cooling_until  INTEGER,
    backoff_level  INTEGER NOT NULL,
    last_error     TEXT,
    changed_at     INTEGER NOT NULL,
    PRIMARY KEY (provider, credential)
) STRICT;

CREATE TABLE model_lockouts (
    provider              TEXT    NOT NULL,
    credential            TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    locked_until          INTEGER,
    consecutive_failures  INTEGER NOT NULL,
    reason_kind           TEXT,
    reason_status         INTEGER,
    changed_at            INTEGER NOT NULL,
    PRIMARY KEY (provider, credential, model)
) STRICT;

-- One row per settings section; `body` is the section's serde form as JSON.
CREATE TABLE settings (
    section         TEXT    NOT NULL PRIMARY KEY,
    schema_version  INTEGER NOT NULL,
    body            TEXT    NOT NULL CHECK (json_valid(body)),
    updated_at      INTEGER NOT NULL
) STRICT;
