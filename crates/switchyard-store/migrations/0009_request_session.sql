-- Which agent session each request belonged to (RESILIENCE.md §11) and the credential that
-- served it: the request log is where a session's pin is read back after a restart, and what
-- `/api/usage?group_by=session` sums. `session` is 32 hex digits, never a client's own id.

ALTER TABLE requests ADD COLUMN session TEXT;
ALTER TABLE requests ADD COLUMN credential TEXT;
CREATE INDEX requests_session ON requests (session) WHERE session IS NOT NULL;
