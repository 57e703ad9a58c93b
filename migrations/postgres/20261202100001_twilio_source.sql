-- A `[[source]]` of kind `twilio` (a person's reply to a Twilio number, posted to the
-- daemon) records with `twilio` as `source`.
ALTER TABLE ledger DROP CONSTRAINT ledger_source_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import', 'van', 'action_network', 'twilio')) NOT VALID;
ALTER TABLE ledger VALIDATE CONSTRAINT ledger_source_check;
ALTER TABLE consent_state DROP CONSTRAINT consent_state_source_check;
ALTER TABLE consent_state ADD CONSTRAINT consent_state_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import', 'van', 'action_network', 'twilio')) NOT VALID;
ALTER TABLE consent_state VALIDATE CONSTRAINT consent_state_source_check;
