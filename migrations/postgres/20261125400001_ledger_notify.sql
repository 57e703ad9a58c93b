-- Wakes the followers of the ledger on every replica (src/signal.rs: subscriber senders, the
-- SSE stream, `wait=` on the change feed) when entries are appended: a NOTIFY in the
-- appending transaction is delivered when it commits (never if it rolls back), and coming
-- from a trigger it costs the appender no round trip of its own. PostgreSQL folds the
-- notifications of one transaction into one.
CREATE FUNCTION ledger_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outreach_sync_ledger', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER ledger_notify AFTER INSERT ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_notify();
