-- Every verified delivery, committed before it is acknowledged, raw bytes kept for re-parsing.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    -- `event:{id}` from the payload, `webhook:{webhook-id}`, or `sha256:{hex of the body}`
    dedup_key     TEXT    NOT NULL UNIQUE,
    received_at   TEXT    NOT NULL,            -- RFC 3339, UTC, milliseconds
    body          BLOB    NOT NULL,
    headers       TEXT    NOT NULL,            -- JSON object of the headers that matter
    secret_index  INTEGER NOT NULL,            -- which configured secret verified it
    state         TEXT    NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'applied', 'quarantined')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    applied_at    TEXT
);
CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_quarantined ON outbox (id) WHERE state = 'quarantined';

-- The most recent deliveries that failed verification (bounded), for `webhooks diagnose`.
CREATE TABLE rejected_deliveries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    headers     TEXT    NOT NULL,              -- JSON array of [name, value]
    body        BLOB    NOT NULL
);

-- Small durable facts of the daemon (e.g. the token request guard across restarts).
CREATE TABLE daemon_state (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
