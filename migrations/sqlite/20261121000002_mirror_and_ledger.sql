-- The local mirror of the service's leads. A lead's consent (globalOptedOut) is the
-- consent_state row of its (organization, number): one source of truth.
CREATE TABLE leads (
    id                 TEXT PRIMARY KEY,
    organization_id    TEXT NOT NULL,
    phone_number       TEXT NOT NULL,
    first_name         TEXT,
    last_name          TEXT,
    notes              TEXT,
    follow_up          TEXT,
    email              TEXT,
    postal_code        TEXT,
    phone_number_type  TEXT,
    active_group_ids   TEXT NOT NULL DEFAULT '[]',   -- JSON array
    inactive_group_ids TEXT NOT NULL DEFAULT '[]',   -- JSON array
    tag_ids            TEXT NOT NULL DEFAULT '[]',   -- JSON array
    custom_fields      TEXT NOT NULL DEFAULT '{}',   -- JSON object
    created_at         TEXT,
    -- time of the observation the non-consent fields come from (last writer wins)
    observed_at        TEXT NOT NULL,
    -- hash of the fields above, so an unchanged lead is not rewritten on every scan
    content_hash       INTEGER NOT NULL DEFAULT 0,
    updated_at         TEXT NOT NULL
);
CREATE INDEX leads_by_phone ON leads (phone_number, organization_id);
CREATE INDEX leads_by_org ON leads (organization_id);

-- Current consent per (organization, number): the service identifies a lead by that pair.
CREATE TABLE consent_state (
    organization_id TEXT NOT NULL,
    phone_number    TEXT NOT NULL,
    lead_id         TEXT,
    opted_out       INTEGER NOT NULL,
    changed_at      TEXT NOT NULL,     -- event time of the winning change
    source          TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local')),
    seq             INTEGER NOT NULL,  -- ledger entry that set it
    PRIMARY KEY (organization_id, phone_number)
);
CREATE INDEX consent_state_by_phone ON consent_state (phone_number);

-- Append-only: every consent event, once, including those that lost to a newer one.
CREATE TABLE ledger (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    organization_id TEXT NOT NULL,
    lead_id         TEXT,
    phone_number    TEXT NOT NULL,
    opted_out       INTEGER NOT NULL,
    occurred_at     TEXT NOT NULL,
    recorded_at     TEXT NOT NULL,
    source          TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local')),
    event_ref       TEXT NOT NULL,
    superseded      INTEGER NOT NULL DEFAULT 0,  -- a newer state was already in place
    tag_id          TEXT,
    reason          TEXT
);
CREATE UNIQUE INDEX ledger_once_per_event ON ledger (event_ref, organization_id, phone_number);
CREATE INDEX ledger_by_phone ON ledger (phone_number, seq);

CREATE TRIGGER ledger_is_append_only_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'the consent ledger is append-only'); END;
CREATE TRIGGER ledger_is_append_only_delete BEFORE DELETE ON ledger
BEGIN SELECT RAISE(ABORT, 'the consent ledger is append-only'); END;

-- Message delivery statuses.
CREATE TABLE messages (
    id              TEXT PRIMARY KEY,
    thread_id       TEXT,
    status          TEXT NOT NULL,
    type            TEXT,
    created_at      TEXT,
    error_code      TEXT,
    lead_id         TEXT,
    organization_id TEXT,
    terminal        INTEGER NOT NULL,
    status_at       TEXT NOT NULL,    -- event time of the current status
    source          TEXT NOT NULL,
    first_seen_at   TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX messages_open ON messages (status_at) WHERE terminal = 0;

-- Stable views for other tools (columns may be added, never renamed).
CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
    FROM consent_state;

CREATE VIEW consent_ledger AS
    SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
           source, event_ref, superseded
    FROM ledger;
