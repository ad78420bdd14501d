-- What each request used, summed over its attempts, in buckets that never overlap (issue 18):
-- all NULL when no attempt reported usage. `output_tokens` includes `reasoning_tokens`.
-- `usage_estimated` is 1 when some count is not the upstream's final word (a cut stream).
-- The cost is integer nano-dollars, NULL when some attempt's prices are not known.

ALTER TABLE requests ADD COLUMN uncached_input_tokens INTEGER;
ALTER TABLE requests ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER;
ALTER TABLE requests ADD COLUMN output_tokens INTEGER;
ALTER TABLE requests ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE requests ADD COLUMN usage_estimated INTEGER;
ALTER TABLE requests ADD COLUMN cost_nanodollars INTEGER;
