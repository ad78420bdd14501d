-- Local API keys for the /v1 endpoint. Only a SHA-256 of each key is kept: the key itself is
-- shown once, when it is created, and cannot be read back.

CREATE TABLE api_keys (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    sha256      TEXT    NOT NULL UNIQUE,
    hint        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) STRICT;
