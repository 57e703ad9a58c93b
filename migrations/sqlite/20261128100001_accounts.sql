-- Several accounts, one ledger: every row says which account of the service it is of.
--
-- Lead, message and organization ids are the service's, and two accounts may use the same
-- id for different things, so every key the service's ids are part of gains `account_id`.
-- It comes last in each key: within one account (the only case before this migration) the
-- keys order and find rows as they did. What exists is of the account `default` (the
-- ledger's entries cannot be renamed: their hashes cover their account).
--
-- SQLite cannot change a table's key in place: the keyed tables are rebuilt (a one-time
-- copy, in this migration's transaction).

DROP VIEW consent_current;
DROP VIEW consent_ledger;

-- The outbox: a delivery is a duplicate of an earlier one of the same account only.
CREATE TABLE outbox_by_account (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    -- `event:{id}` from the payload, `webhook:{webhook-id}`, or `sha256:{hex of the body}`
    dedup_key       TEXT    NOT NULL,
    received_at     TEXT    NOT NULL,            -- RFC 3339, UTC, milliseconds
    body            BLOB    NOT NULL,
    headers         TEXT    NOT NULL,            -- JSON object of the headers that matter
    secret_index    INTEGER NOT NULL,            -- which configured secret verified it
    state           TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'applied', 'quarantined')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    applied_at      TEXT,
    verified_header INTEGER,
    -- the account whose ingest path it arrived on
    account_id      TEXT    NOT NULL DEFAULT 'default',
    UNIQUE (dedup_key, account_id)
);
INSERT INTO outbox_by_account
       (id, dedup_key, received_at, body, headers, secret_index, state, attempts, last_error,
        applied_at, verified_header)
SELECT id, dedup_key, received_at, body, headers, secret_index, state, attempts, last_error,
       applied_at, verified_header
FROM outbox;
-- Ids are never handed out twice, even those of pruned rows.
DELETE FROM sqlite_sequence WHERE name = 'outbox_by_account';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'outbox_by_account', seq FROM sqlite_sequence WHERE name = 'outbox';
DROP TABLE outbox;
ALTER TABLE outbox_by_account RENAME TO outbox;
CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';
CREATE INDEX outbox_quarantined ON outbox (id) WHERE state = 'quarantined';

ALTER TABLE rejected_deliveries ADD COLUMN account_id TEXT;

-- The mirror.
CREATE TABLE leads_by_account (
    id                 TEXT NOT NULL,
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
    updated_at         TEXT NOT NULL,
    account_id         TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (id, account_id)
);
INSERT INTO leads_by_account
       (id, organization_id, phone_number, first_name, last_name, notes, follow_up, email,
        postal_code, phone_number_type, active_group_ids, inactive_group_ids, tag_ids,
        custom_fields, created_at, observed_at, content_hash, updated_at)
SELECT id, organization_id, phone_number, first_name, last_name, notes, follow_up, email,
       postal_code, phone_number_type, active_group_ids, inactive_group_ids, tag_ids,
       custom_fields, created_at, observed_at, content_hash, updated_at
FROM leads;
DROP TABLE leads;
ALTER TABLE leads_by_account RENAME TO leads;
CREATE INDEX leads_by_org ON leads (organization_id, account_id);

CREATE TABLE consent_state_by_account (
    organization_id TEXT NOT NULL,
    phone_number    TEXT NOT NULL,
    lead_id         TEXT,
    opted_out       INTEGER NOT NULL,
    changed_at      TEXT NOT NULL,     -- event time of the winning change
    source          TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local', 'import')),
    seq             INTEGER NOT NULL,  -- ledger entry that set it
    account_id      TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (phone_number, organization_id, account_id)
);
INSERT INTO consent_state_by_account
       (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
SELECT organization_id, phone_number, lead_id, opted_out, changed_at, source, seq
FROM consent_state;
DROP TABLE consent_state;
ALTER TABLE consent_state_by_account RENAME TO consent_state;

CREATE TABLE messages_by_account (
    id              TEXT NOT NULL,
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
    updated_at      TEXT NOT NULL,
    account_id      TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (id, account_id)
);
INSERT INTO messages_by_account
       (id, thread_id, status, type, created_at, error_code, lead_id, organization_id,
        terminal, status_at, source, first_seen_at, updated_at)
SELECT id, thread_id, status, type, created_at, error_code, lead_id, organization_id,
       terminal, status_at, source, first_seen_at, updated_at
FROM messages;
DROP TABLE messages;
ALTER TABLE messages_by_account RENAME TO messages;
CREATE INDEX messages_open ON messages (status_at) WHERE terminal = 0;
CREATE INDEX messages_done ON messages (status_at) WHERE terminal = 1;
CREATE INDEX messages_by_lead ON messages (lead_id) WHERE lead_id IS NOT NULL;

-- The ledger: a column added (adding one is no UPDATE, so the append-only triggers stay
-- quiet), one entry per event and (account, organization, number).
ALTER TABLE ledger ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX ledger_once_per_event;
CREATE UNIQUE INDEX ledger_once_per_event
    ON ledger (event_ref, organization_id, phone_number, account_id);
DROP TRIGGER ledger_is_append_only_update;
CREATE TRIGGER ledger_is_append_only_update BEFORE UPDATE ON ledger
WHEN NOT (OLD.hash IS NULL AND NEW.hash IS NOT NULL
          AND NEW.seq IS OLD.seq AND NEW.organization_id IS OLD.organization_id
          AND NEW.lead_id IS OLD.lead_id AND NEW.phone_number IS OLD.phone_number
          AND NEW.opted_out IS OLD.opted_out AND NEW.occurred_at IS OLD.occurred_at
          AND NEW.recorded_at IS OLD.recorded_at AND NEW.source IS OLD.source
          AND NEW.event_ref IS OLD.event_ref AND NEW.superseded IS OLD.superseded
          AND NEW.tag_id IS OLD.tag_id AND NEW.reason IS OLD.reason
          AND NEW.evidence IS OLD.evidence AND NEW.account_id IS OLD.account_id)
BEGIN SELECT RAISE(ABORT, 'the consent ledger is append-only'); END;

ALTER TABLE pushes ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';

CREATE TABLE suppressions_by_account (
    phone_number TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    since        TEXT NOT NULL,
    account_id   TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (phone_number, account_id)
);
INSERT INTO suppressions_by_account (phone_number, seq, since)
SELECT phone_number, seq, since FROM suppressions;
DROP TABLE suppressions;
ALTER TABLE suppressions_by_account RENAME TO suppressions;

-- Reconciliation, per account.
CREATE TABLE reconcile_checkpoints_by_account (
    organization_id TEXT NOT NULL,
    pass_id         TEXT NOT NULL,
    cursor          TEXT,
    leads_scanned   INTEGER NOT NULL DEFAULT 0,
    repaired        INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    account_id      TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (organization_id, account_id)
);
INSERT INTO reconcile_checkpoints_by_account
       (organization_id, pass_id, cursor, leads_scanned, repaired, started_at, updated_at)
SELECT organization_id, pass_id, cursor, leads_scanned, repaired, started_at, updated_at
FROM reconcile_checkpoints;
DROP TABLE reconcile_checkpoints;
ALTER TABLE reconcile_checkpoints_by_account RENAME TO reconcile_checkpoints;

CREATE TABLE reconcile_organizations_by_account (
    organization_id TEXT NOT NULL,
    pass_id         TEXT NOT NULL,
    finished_at     TEXT NOT NULL,
    leads_scanned   INTEGER NOT NULL,
    repaired        INTEGER NOT NULL,
    error           TEXT,
    account_id      TEXT NOT NULL DEFAULT 'default',
    PRIMARY KEY (organization_id, account_id)
);
INSERT INTO reconcile_organizations_by_account
       (organization_id, pass_id, finished_at, leads_scanned, repaired, error)
SELECT organization_id, pass_id, finished_at, leads_scanned, repaired, error
FROM reconcile_organizations;
DROP TABLE reconcile_organizations;
ALTER TABLE reconcile_organizations_by_account RENAME TO reconcile_organizations;

ALTER TABLE reconcile_passes ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';

-- The stable views gain the account as their last column.
CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source, account_id
    FROM consent_state;

CREATE VIEW consent_ledger AS
    SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
           source, event_ref, superseded, account_id
    FROM ledger;
