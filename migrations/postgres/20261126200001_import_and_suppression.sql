-- Opt-out lists imported from other platforms are recorded with source 'import', and a
-- number opted out account-wide is suppressed: a lead that appears with it later is opted
-- out too.
--
-- The wider constraints hold for every stored row (they allow one value more), so they are
-- added without a scan of the ledger (NOT VALID) and validated after, under a lock that
-- lets writers on.
ALTER TABLE ledger DROP CONSTRAINT ledger_source_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import')) NOT VALID;
ALTER TABLE ledger VALIDATE CONSTRAINT ledger_source_check;
ALTER TABLE consent_state DROP CONSTRAINT consent_state_source_check;
ALTER TABLE consent_state ADD CONSTRAINT consent_state_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import')) NOT VALID;
ALTER TABLE consent_state VALIDATE CONSTRAINT consent_state_source_check;

-- Numbers opted out for the whole account, from the account-wide opt-out (`seq`, at its
-- event time `since`) until an account-wide opt-in later than it removes the row.
CREATE TABLE suppressions (
    phone_number TEXT        PRIMARY KEY,
    seq          BIGINT      NOT NULL,
    since        TIMESTAMPTZ NOT NULL
);
