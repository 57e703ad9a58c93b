-- Every index keyed by number costs a random B-tree insert for each new number, which is
-- most of the work of importing leads. Two of them go:
--
-- consent_state is keyed by (number, organization) instead of (organization, number): reads
-- by number (a person's consent across organizations, account sync) use the key itself, so
-- its separate index by number goes.
--
-- leads_by_phone goes: the mirror reaches leads by number through consent_state, which
-- holds a row, with the lead id, for the (organization, number) of every mirrored lead
-- (written in the transaction that mirrors the lead).
DROP INDEX leads_by_phone;

DROP VIEW consent_current;

CREATE TABLE consent_state_by_number (
    organization_id TEXT NOT NULL,
    phone_number    TEXT NOT NULL,
    lead_id         TEXT,
    opted_out       INTEGER NOT NULL,
    changed_at      TEXT NOT NULL,     -- event time of the winning change
    source          TEXT NOT NULL CHECK (source IN ('webhook', 'reconcile', 'local')),
    seq             INTEGER NOT NULL,  -- ledger entry that set it
    PRIMARY KEY (phone_number, organization_id)
);
INSERT INTO consent_state_by_number
    SELECT organization_id, phone_number, lead_id, opted_out, changed_at, source, seq
    FROM consent_state;
DROP TABLE consent_state;
ALTER TABLE consent_state_by_number RENAME TO consent_state;

CREATE VIEW consent_current AS
    SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
    FROM consent_state;
