-- How a streamed request ended (`complete`, `broken`, `client_gone`; NULL for a non-streamed
-- one, whose status says it all) and when its first byte reached the client.

ALTER TABLE requests ADD COLUMN outcome TEXT;
ALTER TABLE requests ADD COLUMN first_byte_ms INTEGER;
