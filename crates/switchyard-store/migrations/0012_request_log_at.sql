-- min_reader_version: 0.1.0
--
-- Usage by session reads the request log by time range (`requests_between`), which walked the
-- whole table.

CREATE INDEX requests_at ON requests (at);
