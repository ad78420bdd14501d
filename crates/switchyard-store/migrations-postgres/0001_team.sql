-- Team mode (issue 20): health state shared by several Switchyard instances.
--
-- Instants are BIGINT unix milliseconds of this database's clock (the instances convert them
-- with their measured offset); enums are their serde snake_case names, as in the SQLite file.
-- Entries are named across machines: a provider by its normalised base URL, a credential by a
-- keyed hash of its secret (HMAC-SHA256 under `team_meta.salt`), never by config-local names.
--
-- Every change of an entry takes the next value of one sequence as its version (so "what changed
-- since version N" is one query per table) and is announced on the `switchyard_team` channel
-- with the whole row, delivered when the change commits.

-- The team's salt for the keyed hashes, created once by whichever instance gets there first.
CREATE TABLE team_meta (
    id          SMALLINT PRIMARY KEY CHECK (id = 1),
    salt        BYTEA    NOT NULL,
    created_at  BIGINT   NOT NULL
);

-- Instances announce themselves on every heartbeat; the health page lists those seen lately.
CREATE TABLE team_instances (
    id          TEXT   PRIMARY KEY,
    version     TEXT   NOT NULL,
    started_at  BIGINT NOT NULL,
    seen_at     BIGINT NOT NULL
);

CREATE SEQUENCE team_version;

CREATE TABLE team_breakers (
    provider      TEXT    PRIMARY KEY,
    state         TEXT    NOT NULL,
    failures      INTEGER NOT NULL,
    reopens       INTEGER NOT NULL,
    open_until    BIGINT,
    last_fault    TEXT,
    changed_at    BIGINT  NOT NULL,
    -- The half-open probe slot: who holds it, until when.
    lease_holder  TEXT,
    lease_until   BIGINT,
    recorded_by   TEXT    NOT NULL,
    version       BIGINT  NOT NULL
);

CREATE TABLE team_credentials (
    provider       TEXT    NOT NULL,
    key_hash       TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    cooling_until  BIGINT,
    backoff_level  INTEGER NOT NULL,
    last_error     TEXT,
    changed_at     BIGINT  NOT NULL,
    recorded_by    TEXT    NOT NULL,
    version        BIGINT  NOT NULL,
    PRIMARY KEY (provider, key_hash)
);

CREATE TABLE team_lockouts (
    provider              TEXT    NOT NULL,
    key_hash              TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    locked_until          BIGINT,
    consecutive_failures  INTEGER NOT NULL,
    reason_kind           TEXT,
    reason_status         INTEGER,
    changed_at            BIGINT  NOT NULL,
    recorded_by           TEXT    NOT NULL,
    version               BIGINT  NOT NULL,
    PRIMARY KEY (provider, key_hash, model)
);

CREATE INDEX team_breakers_version ON team_breakers (version);
CREATE INDEX team_credentials_version ON team_credentials (version);
CREATE INDEX team_lockouts_version ON team_lockouts (version);

-- Stamps every insert and update with the next version.
CREATE FUNCTION team_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := nextval('team_version');
    RETURN NEW;
END
$$;

-- Announces a row once it is really written: an AFTER trigger, because a BEFORE trigger also
-- runs for an `INSERT ... ON CONFLICT DO NOTHING` that loses its race and writes nothing.
CREATE FUNCTION team_announce() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        'switchyard_team',
        json_build_object('table', TG_TABLE_NAME, 'row', row_to_json(NEW))::text
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER team_breakers_stamp BEFORE INSERT OR UPDATE ON team_breakers
    FOR EACH ROW EXECUTE FUNCTION team_stamp();
CREATE TRIGGER team_credentials_stamp BEFORE INSERT OR UPDATE ON team_credentials
    FOR EACH ROW EXECUTE FUNCTION team_stamp();
CREATE TRIGGER team_lockouts_stamp BEFORE INSERT OR UPDATE ON team_lockouts
    FOR EACH ROW EXECUTE FUNCTION team_stamp();

CREATE TRIGGER team_breakers_announce AFTER INSERT OR UPDATE ON team_breakers
    FOR EACH ROW EXECUTE FUNCTION team_announce();
CREATE TRIGGER team_credentials_announce AFTER INSERT OR UPDATE ON team_credentials
    FOR EACH ROW EXECUTE FUNCTION team_announce();
CREATE TRIGGER team_lockouts_announce AFTER INSERT OR UPDATE ON team_lockouts
    FOR EACH ROW EXECUTE FUNCTION team_announce();
