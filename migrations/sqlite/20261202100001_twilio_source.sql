-- A `[[source]]` of kind `twilio` (a person's reply to a Twilio number, posted to the
-- daemon) records with `twilio` as `source`: the CHECK on `ledger` and `consent_state`
-- widened as 20261130100001 widened it (a wider CHECK changes nothing stored).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''van'', ''action_network''))',
                       '''van'', ''action_network'', ''twilio''))')
WHERE type = 'table' AND name IN ('ledger', 'consent_state');
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_moves_on (x INTEGER);
DROP TABLE schema_cookie_moves_on;
