-- Several accounts, one ledger: every row says which account of the service it is of.
--
-- Lead, message and organization ids are the service's, and two accounts may use the same
-- id for different things, so every key the service's ids are part of gains `account_id`.
-- It comes last in each key: within one account (the only case before this migration) the
-- keys order and find rows as they did. What exists is of the account `default` (the
-- ledger's entries cannot be renamed: their hashes cover their account).

DROP VIEW consent_current;
DROP VIEW consent_ledger;

ALTER TABLE outbox ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE outbox DROP CONSTRAINT outbox_dedup_key_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_dedup_key_key UNIQUE (dedup_key, account_id);

ALTER TABLE rejected_deliveries ADD COLUMN account_id TEXT;

ALTER TABLE leads ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE leads DROP CONSTRAINT leads_pkey;
ALTER TABLE leads ADD PRIMARY KEY (id, account_id);
DROP INDEX leads_by_org;
CREATE INDEX leads_by_org ON leads (organization_id, account_id);

ALTER TABLE consent_state ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE consent_state DROP CONSTRAINT consent_state_pkey;
ALTER TABLE consent_state ADD PRIMARY KEY (phone_number, organization_id, account_id);

ALTER TABLE messages ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE messages DROP CONSTRAINT messages_pkey;
ALTER TABLE messages ADD PRIMARY KEY (id, account_id);

-- Adding a column rewrites no row: the append-only triggers stay quiet.
ALTER TABLE ledger ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
DROP INDEX ledger_once_per_event;
CREATE UNIQUE INDEX ledger_once_per_event
    ON ledger (event_ref, organization_id, phone_number, account_id);

-- The canonical encoding's version step: an entry of an account other than `default`
-- has its account as a 14th element; an entry of `default` (every entry recorded before
-- this migration) is encoded as it always was, so its hash still holds.
CREATE OR REPLACE FUNCTION ledger_entry_hash(prev TEXT, e ledger) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(
        '[' || to_json(prev)::text
        || ',' || e.seq::text
        || ',' || to_json(e.organization_id)::text
        || ',' || COALESCE(to_json(e.lead_id)::text, 'null')
        || ',' || to_json(e.phone_number)::text
        || ',' || CASE WHEN e.opted_out THEN 'true' ELSE 'false' END
        || ',' || to_json(to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
        || ',' || to_json(to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
        || ',' || to_json(e.source)::text
        || ',' || to_json(e.event_ref)::text
        || ',' || CASE WHEN e.superseded THEN 'true' ELSE 'false' END
        || ',' || COALESCE(to_json(e.tag_id)::text, 'null')
        || ',' || COALESCE(to_json(e.reason)::text, 'null')
        || CASE WHEN e.account_id = 'default' THEN '' ELSE ',' || to_json(e.account_id)::text END
        || ']', 'UTF8')), 'hex')
$$;

ALTER TABLE pushes ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';

ALTER TABLE suppressions ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE suppressions DROP CONSTRAINT suppressions_pkey;
ALTER TABLE suppressions ADD PRIMARY KEY (phone_number, account_id);

ALTER TABLE reconcile_checkpoints ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE reconcile_checkpoints DROP CONSTRAINT reconcile_checkpoints_pkey;
ALTER TABLE reconcile_checkpoints ADD PRIMARY KEY (organization_id, account_id);

ALTER TABLE reconcile_organizations ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE reconcile_organizations DROP CONSTRAINT reconcile_organizations_pkey;
ALTER TABLE reconcile_organizations ADD PRIMARY KEY (organization_id, account_id);

ALTER TABLE reconcile_passes ADD COLUMN account_id TEXT NOT NULL DEFAULT 'default';

-- The stable views gain the account as their last column: the same on both backends.
CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source, account_id
    FROM consent_state;

CREATE VIEW consent_ledger AS
    SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
           source, event_ref, superseded, account_id
    FROM ledger;
