-- `source` on `ledger` and `consent_state` is checked by the code alone (`model::Source`,
-- which refuses a word it does not know when it reads one): a new kind of source needs no
-- migration. The constraints are those 20261202100001 made last.
ALTER TABLE ledger DROP CONSTRAINT IF EXISTS ledger_source_check;
ALTER TABLE consent_state DROP CONSTRAINT IF EXISTS consent_state_source_check;
