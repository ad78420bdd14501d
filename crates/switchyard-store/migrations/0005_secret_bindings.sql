-- Confirmed (secret reference, destination) pairs (issue 19): a credential's secret is sent
-- only to destinations the user confirmed for its reference. `reference` is the reference
-- text (`env:VAR`, `keychain:provider/credential`), never a secret; `destination` is
-- `scheme://host:port`, normalised by switchyard_core::binding::destination.

CREATE TABLE secret_bindings (
    reference     TEXT    NOT NULL,
    destination   TEXT    NOT NULL,
    confirmed_at  INTEGER NOT NULL,
    PRIMARY KEY (reference, destination)
) STRICT;
