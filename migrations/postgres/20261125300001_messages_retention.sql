-- Retention of the messages mirror (`[retention] messages_days`): a tracked message whose
-- status is terminal is removed once that status (its event time, `status_at`) is older than
-- the retention. The pruning pass asks for such rows a batch at a time; without an index
-- that is a scan of the whole mirror per batch. A partial index, the counterpart of
-- `messages_open`, holds the finished messages only: together the two cover every row.
CREATE INDEX messages_done ON messages (status_at) WHERE terminal;
