-- Sources (VAN, Action Network read back) record with their kind as `source`: the CHECK
-- on `ledger` and `consent_state` widened as 20261126200001 widened it for `import` (a
-- wider CHECK changes nothing stored; see there).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'CHECK (source IN (''webhook'', ''reconcile'', ''local'', ''import''))',
                       'CHECK (source IN (''webhook'', ''reconcile'', ''local'', ''import'', ''van'', ''action_network''))')
WHERE type = 'table' AND name IN ('ledger', 'consent_state');
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_moves_on (x INTEGER);
DROP TABLE schema_cookie_moves_on;

-- Each [[source]] (a system opt-outs are read back from): where it reads from next and
-- what it has done. The watermark moves only once every record before it is recorded.
CREATE TABLE source_state (
    source          TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    -- read from here next (RFC 3339); NULL: from the source's `since`
    watermark       TEXT,
    last_run_at     TEXT,
    last_success_at TEXT,
    last_error      TEXT,
    read            INTEGER NOT NULL DEFAULT 0,
    opt_outs        INTEGER NOT NULL DEFAULT 0,
    confirmed       INTEGER NOT NULL DEFAULT 0,
    ignored         INTEGER NOT NULL DEFAULT 0
);

-- Each record a source read (VAN: VAN ID, phone and change time; Action Network: person,
-- number and modified_date), claimed in the transaction that records what it says: a
-- record read again (after a crash, in the overlap behind a watermark, by a second run at
-- once) records nothing twice.
CREATE TABLE source_records (
    source  TEXT NOT NULL,
    record  TEXT NOT NULL,
    at      TEXT NOT NULL,
    PRIMARY KEY (source, record)
);
