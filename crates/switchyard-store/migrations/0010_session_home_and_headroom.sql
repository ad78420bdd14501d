-- Sessions and headroom across a restart (RESILIENCE.md §11).
--
-- `session_home` is the target (`provider/model`) a session moved off while it was benched and
-- returns to once it heals: read back with the session's pin, so a restart does not strand a
-- session on its stand-in.
--
-- `credential_headroom` keeps each credential's quota windows as its latest answer described
-- them, written on transitions only (crossing the reserve, a window past its reset), never
-- per answer. `windows` is a JSON array of {name, remaining, resets_at}.

ALTER TABLE requests ADD COLUMN session_home TEXT;

CREATE TABLE credential_headroom (
    provider    TEXT    NOT NULL,
    credential  TEXT    NOT NULL,
    windows     TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (provider, credential)
) STRICT, WITHOUT ROWID;
