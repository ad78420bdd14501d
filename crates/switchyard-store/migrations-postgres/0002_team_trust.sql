-- Team mode for real teams (issue 31): leases for every kind of probe, leases that say when
-- they were granted (an instance honours another's lease for its own probe_timeout from then at
-- most), and bounds on every text column.

-- When the half-open lease was granted, on this database's clock.
ALTER TABLE team_breakers ADD COLUMN lease_since BIGINT;

-- The probe slot of one scope (a provider, a credential or a model on one), for the recovery
-- probes of every bench: one probe of each in flight across the team. A row is free when its
-- `until` has passed; its holder frees it early by moving `until` back to `since`.
CREATE TABLE team_probes (
    scope   TEXT   PRIMARY KEY,
    holder  TEXT   NOT NULL,
    since   BIGINT NOT NULL,
    until   BIGINT NOT NULL
);

-- Bounds, for rows written from now on (NOT VALID: a row already there is not checked, and the
-- instances bound what they read anyway: a member that owns the tables can drop these).
ALTER TABLE team_instances ADD CONSTRAINT team_instances_bounded
    CHECK (length(id) <= 64 AND length(version) <= 64) NOT VALID;
ALTER TABLE team_breakers ADD CONSTRAINT team_breakers_bounded
    CHECK (length(provider) <= 512 AND length(recorded_by) <= 64
           AND (lease_holder IS NULL OR length(lease_holder) <= 64)) NOT VALID;
ALTER TABLE team_credentials ADD CONSTRAINT team_credentials_bounded
    CHECK (length(provider) <= 512 AND length(key_hash) <= 128 AND length(recorded_by) <= 64)
    NOT VALID;
ALTER TABLE team_lockouts ADD CONSTRAINT team_lockouts_bounded
    CHECK (length(provider) <= 512 AND length(key_hash) <= 128 AND length(model) <= 256
           AND length(recorded_by) <= 64) NOT VALID;
ALTER TABLE team_probes ADD CONSTRAINT team_probes_bounded
    CHECK (length(scope) <= 1024 AND length(holder) <= 64);
