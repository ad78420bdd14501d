-- Confirmed destinations (issue 26): a provider's requests (prompts, and whatever they carry)
-- go only to destinations the user confirmed, with or without a secret. `destination` is
-- `scheme://host:port`, normalised by switchyard_core::binding::destination. A row of
-- secret_bindings confirms its destination as well (the domain reads it so), so the
-- destinations confirmed before this table existed need no copy here.

CREATE TABLE destination_bindings (
    destination   TEXT    NOT NULL PRIMARY KEY,
    confirmed_at  INTEGER NOT NULL
) STRICT;
