-- When the run in progress started (NULL: none): `sources` shows the run reading, and
-- for how long, rather than the previous run's error.
ALTER TABLE source_state ADD COLUMN running_since TEXT;
