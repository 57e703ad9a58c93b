-- A source's opt-ins recorded (`opt_ins = true`) are counted apart from its opt-outs.
ALTER TABLE source_state ADD COLUMN opt_ins BIGINT NOT NULL DEFAULT 0;

-- Records noted longer ago than any read can reach again (VAN keeps 90 days) go with
-- retention, oldest first, a batch at a time.
CREATE INDEX source_records_by_age ON source_records (at);
