-- Opt-out lists imported from other platforms are recorded with source 'import', and a
-- number opted out account-wide is suppressed: a lead that appears with it later is opted
-- out too.
--
-- SQLite cannot alter a CHECK constraint; rebuilding the ledger to widen one would copy every
-- entry past its append-only triggers. A wider CHECK changes nothing already stored (every
-- row meets it), which is the case SQLite documents as safe to make by editing the stored
-- schema text (https://www.sqlite.org/lang_altertable.html, "making other kinds of table
-- schema changes"). RESET makes this connection read the schema again; the table created
-- and dropped after it moves the schema cookie on, so every other connection does too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'CHECK (source IN (''webhook'', ''reconcile'', ''local''))',
                       'CHECK (source IN (''webhook'', ''reconcile'', ''local'', ''import''))')
WHERE type = 'table' AND name IN ('ledger', 'consent_state');
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_moves_on (x INTEGER);
DROP TABLE schema_cookie_moves_on;

-- Numbers opted out for the whole account, from the account-wide opt-out (`seq`, at its
-- event time `since`) until an account-wide opt-in later than it removes the row.
CREATE TABLE suppressions (
    phone_number TEXT PRIMARY KEY,
    seq          INTEGER NOT NULL,
    since        TEXT NOT NULL
);
