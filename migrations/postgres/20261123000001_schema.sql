-- The whole schema on PostgreSQL, equal in meaning to the SQLite migrations up to
-- 20261123000002_replicas, written for PostgreSQL: native times, booleans, bytes and jsonb.
-- Replicas that start at once apply it once: sqlx's migrator holds an advisory lock.

-- Every verified delivery, as received, before it is acknowledged.
CREATE TABLE outbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- `event:{id}` from the payload, `webhook:{webhook-id}`, or `sha256:{hex of the body}`
    dedup_key    TEXT        NOT NULL UNIQUE,
    received_at  TIMESTAMPTZ NOT NULL,
    body         BYTEA       NOT NULL,
    headers      JSONB       NOT NULL,   -- the headers that matter
    secret_index INTEGER     NOT NULL,   -- which configured secret verified it
    state        TEXT        NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'applied', 'quarantined')),
    attempts     INTEGER     NOT NULL DEFAULT 0,
    last_error   TEXT,
    applied_at   TIMESTAMPTZ
);
-- Workers of every replica claim pending rows in id order with FOR UPDATE SKIP LOCKED.
CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_quarantined ON outbox (id) WHERE state = 'quarantined';

-- The last deliveries that failed verification, for `webhooks diagnose`.
CREATE TABLE rejected_deliveries (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at TIMESTAMPTZ NOT NULL,
    reason      TEXT        NOT NULL,
    headers     JSONB       NOT NULL,   -- array of [name, value]
    body        BYTEA       NOT NULL
);

-- Small durable facts of the daemon (the token guard, ...), shared by every replica.
CREATE TABLE daemon_state (
    key        TEXT PRIMARY KEY,
    value      TEXT        NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- The mirror of the service's leads.
CREATE TABLE leads (
    id                 TEXT PRIMARY KEY,
    organization_id    TEXT        NOT NULL,
    phone_number       TEXT        NOT NULL,
    first_name         TEXT,
    last_name          TEXT,
    notes              TEXT,
    follow_up          TEXT,
    email              TEXT,
    postal_code        TEXT,
    phone_number_type  TEXT,
    active_group_ids   JSONB       NOT NULL DEFAULT '[]',
    inactive_group_ids JSONB       NOT NULL DEFAULT '[]',
    tag_ids            JSONB       NOT NULL DEFAULT '[]',
    custom_fields      JSONB       NOT NULL DEFAULT '{}',
    created_at         TEXT,                 -- as the service gave it
    -- time of the observation the non-consent fields come from (last writer wins)
    observed_at        TIMESTAMPTZ NOT NULL,
    -- hash of the fields above, so an unchanged lead is not rewritten on every scan
    content_hash       BIGINT      NOT NULL DEFAULT 0,
    updated_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX leads_by_org ON leads (organization_id);

-- The consent ledger: append-only, one entry per accepted consent event and effect.
--
-- `seq` is not a sequence: PostgreSQL sequences hand out numbers at insert and commit in
-- any order, so a follower reading "after 41" could see 43 commit before 42 and skip 42
-- for good. Instead every transaction that appends takes its seqs from `ledger_head`
-- (UPDATE ... RETURNING), whose row lock it holds until it commits: the next appender
-- waits for that commit, so seqs are gapless and become visible in order. Appenders take
-- the head last, just before their commit, to hold it briefly.
CREATE TABLE ledger (
    seq             BIGINT PRIMARY KEY,
    organization_id TEXT        NOT NULL,
    lead_id         TEXT,
    phone_number    TEXT        NOT NULL,
    opted_out       BOOLEAN     NOT NULL,
    occurred_at     TIMESTAMPTZ NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL,
    source          TEXT        NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local')),
    event_ref       TEXT        NOT NULL,
    superseded      BOOLEAN     NOT NULL DEFAULT FALSE,  -- a newer state was already in place
    tag_id          TEXT,
    reason          TEXT
);
CREATE UNIQUE INDEX ledger_once_per_event ON ledger (event_ref, organization_id, phone_number);
CREATE INDEX ledger_by_phone ON ledger (phone_number, seq);

CREATE TABLE ledger_head (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    seq       BIGINT NOT NULL       -- the last seq handed out
);
INSERT INTO ledger_head (singleton, seq) VALUES (TRUE, 0);

CREATE FUNCTION ledger_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the consent ledger is append-only';
END;
$$;
CREATE TRIGGER ledger_is_append_only_update BEFORE UPDATE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_is_append_only();
CREATE TRIGGER ledger_is_append_only_delete BEFORE DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_is_append_only();
CREATE TRIGGER ledger_is_append_only_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_is_append_only();

-- The current consent of each (number, organization): the winner by event time.
CREATE TABLE consent_state (
    organization_id TEXT        NOT NULL,
    phone_number    TEXT        NOT NULL,
    lead_id         TEXT,
    opted_out       BOOLEAN     NOT NULL,
    changed_at      TIMESTAMPTZ NOT NULL,  -- event time of the winning change
    source          TEXT        NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local')),
    seq             BIGINT      NOT NULL,  -- ledger entry that set it
    PRIMARY KEY (phone_number, organization_id)
);

-- Message statuses: a terminal status never goes back to a non-terminal one.
CREATE TABLE messages (
    id              TEXT PRIMARY KEY,
    thread_id       TEXT,
    status          TEXT        NOT NULL,
    type            TEXT,
    created_at      TEXT,                  -- as the service gave it
    error_code      TEXT,
    lead_id         TEXT,
    organization_id TEXT,
    terminal        BOOLEAN     NOT NULL,
    status_at       TIMESTAMPTZ NOT NULL,  -- event time of the current status
    source          TEXT        NOT NULL,
    first_seen_at   TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX messages_open ON messages (status_at) WHERE NOT terminal;

-- Local consent changes on their way to the service.
CREATE TABLE pushes (
    seq              BIGINT PRIMARY KEY,   -- the ledger entry of the local change
    organization_id  TEXT        NOT NULL,
    phone_number     TEXT        NOT NULL,
    opted_out        BOOLEAN     NOT NULL,
    tag_id           TEXT,
    state            TEXT        NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sent', 'failed', 'superseded')),
    attempts         INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at  TIMESTAMPTZ NOT NULL,
    first_attempt_at TIMESTAMPTZ,
    last_attempt_at  TIMESTAMPTZ,
    last_error       TEXT,
    lead_id          TEXT,                 -- the service's lead, once known
    created_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,          -- when it became sent or failed
    echo_ref         TEXT                  -- event_ref of the recognised echo
);
CREATE INDEX pushes_due ON pushes (next_attempt_at) WHERE state = 'pending';
CREATE INDEX pushes_by_number ON pushes (organization_id, phone_number);
CREATE INDEX pushes_by_echo ON pushes (echo_ref) WHERE echo_ref IS NOT NULL;

-- Where an interrupted leads pass resumes: one row per organization being scanned.
CREATE TABLE reconcile_checkpoints (
    organization_id TEXT PRIMARY KEY,
    pass_id         TEXT        NOT NULL,
    cursor          TEXT,
    leads_scanned   BIGINT      NOT NULL DEFAULT 0,
    repaired        BIGINT      NOT NULL DEFAULT 0,
    started_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

-- The last completed leads pass of each organization, for `status`.
CREATE TABLE reconcile_organizations (
    organization_id TEXT PRIMARY KEY,
    pass_id         TEXT        NOT NULL,
    finished_at     TIMESTAMPTZ NOT NULL,
    leads_scanned   BIGINT      NOT NULL,
    repaired        BIGINT      NOT NULL,
    error           TEXT
);

-- Every pass, with its summary.
CREATE TABLE reconcile_passes (
    id          TEXT PRIMARY KEY,
    started_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ NOT NULL,
    summary     JSONB       NOT NULL
);

-- Work that runs in one place at a time, on the database's clock (Unix milliseconds).
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT   NOT NULL,
    acquired_ms BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL
);

-- The processes serving this database, by heartbeat, for `status`; the leader is the
-- holder of the `leader` lease.
CREATE TABLE replicas (
    name         TEXT PRIMARY KEY,
    started_ms   BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL
);

-- The stable views other tools may read: the same names and columns as on SQLite.
CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
    FROM consent_state;

CREATE VIEW consent_ledger AS
    SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
           source, event_ref, superseded
    FROM ledger;
