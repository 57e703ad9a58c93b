-- The processes serving this database, by heartbeat (Unix milliseconds on the database's
-- clock), for `status`. The leader is the holder of the `leader` lease.
CREATE TABLE replicas (
    name         TEXT PRIMARY KEY,
    started_ms   INTEGER NOT NULL,
    last_seen_ms INTEGER NOT NULL
);
