-- `source` on `ledger` and `consent_state` is checked by the code alone (`model::Source`,
-- which refuses a word it does not know when it reads one): a new kind of source needs no
-- migration. SQLite cannot drop a CHECK in place, so both tables are rebuilt as SQLite's
-- documented procedure for a change of table does it (a one-time copy, in this
-- migration's transaction): each new table has the old one's columns in the same order,
-- with their types, defaults and keys; the rows are copied with their rowid (the ledger's
-- `seq`) and the ledger's sequence; the indexes, triggers and views on them are made again
-- as the earlier migrations left them. No foreign key refers to either table, so foreign
-- keys need not be switched off (which a transaction could not do anyway).

-- The views that read the tables, made again below.
DROP VIEW consent_current;
DROP VIEW consent_ledger;

-- The ledger.
CREATE TABLE ledger_checked_by_code (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    organization_id TEXT NOT NULL,
    lead_id         TEXT,
    phone_number    TEXT NOT NULL,
    opted_out       INTEGER NOT NULL,
    occurred_at     TEXT NOT NULL,
    recorded_at     TEXT NOT NULL,
    source          TEXT NOT NULL,
    event_ref       TEXT NOT NULL,
    superseded      INTEGER NOT NULL DEFAULT 0,  -- a newer state was already in place
    tag_id          TEXT,
    reason          TEXT,
    hash            TEXT,
    evidence        TEXT,
    account_id      TEXT NOT NULL DEFAULT 'default'
);
INSERT INTO ledger_checked_by_code
       (seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
        source, event_ref, superseded, tag_id, reason, hash, evidence, account_id)
SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
       source, event_ref, superseded, tag_id, reason, hash, evidence, account_id
FROM ledger ORDER BY seq;
-- A seq is never handed out twice.
DELETE FROM sqlite_sequence WHERE name = 'ledger_checked_by_code';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'ledger_checked_by_code', seq FROM sqlite_sequence WHERE name = 'ledger';
-- Dropping a table deletes no row through its triggers: the append-only ones stay quiet.
DROP TABLE ledger;
ALTER TABLE ledger_checked_by_code RENAME TO ledger;
CREATE INDEX ledger_by_phone ON ledger (phone_number, seq);
CREATE INDEX ledger_unhashed ON ledger (seq) WHERE hash IS NULL;
CREATE INDEX ledger_opt_outs_by_lead ON ledger (lead_id) WHERE opted_out AND lead_id IS NOT NULL;
CREATE UNIQUE INDEX ledger_once_per_event
    ON ledger (event_ref, organization_id, phone_number, account_id);
CREATE TRIGGER ledger_is_append_only_delete BEFORE DELETE ON ledger
BEGIN SELECT RAISE(ABORT, 'the consent ledger is append-only'); END;
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

-- The consent states.
CREATE TABLE consent_state_checked_by_code (
    organization_id TEXT NOT NULL,
    phone_number    TEXT NOT NULL,
    lead_id         TEXT,
    opted_out       INTEGER NOT NULL,
    changed_at      TEXT NOT NULL,     -- event time of the winning change
    source          TEXT NOT NULL,
    seq             INTEGER NOT NULL,  -- ledger entry that set it
    account_id      TEXT NOT NULL DEFAULT 'default',
    rank_at         TEXT,
    PRIMARY KEY (phone_number, organization_id, account_id)
);
INSERT INTO consent_state_checked_by_code
       (rowid, organization_id, phone_number, lead_id, opted_out, changed_at, source, seq,
        account_id, rank_at)
SELECT rowid, organization_id, phone_number, lead_id, opted_out, changed_at, source, seq,
       account_id, rank_at
FROM consent_state ORDER BY rowid;
DROP TABLE consent_state;
ALTER TABLE consent_state_checked_by_code RENAME TO consent_state;

-- The stable views, as 20261128100001 made them.
CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source, account_id
    FROM consent_state;

CREATE VIEW consent_ledger AS
    SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
           source, event_ref, superseded, account_id
    FROM ledger;
