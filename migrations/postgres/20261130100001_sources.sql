-- Sources (VAN, Action Network read back) record with their kind as `source`.
ALTER TABLE ledger DROP CONSTRAINT ledger_source_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import', 'van', 'action_network')) NOT VALID;
ALTER TABLE ledger VALIDATE CONSTRAINT ledger_source_check;
ALTER TABLE consent_state DROP CONSTRAINT consent_state_source_check;
ALTER TABLE consent_state ADD CONSTRAINT consent_state_source_check
    CHECK (source IN ('webhook', 'reconcile', 'local', 'import', 'van', 'action_network')) NOT VALID;
ALTER TABLE consent_state VALIDATE CONSTRAINT consent_state_source_check;

-- Each [[source]] (a system opt-outs are read back from): where it reads from next and
-- what it has done. The watermark moves only once every record before it is recorded.
CREATE TABLE source_state (
    source          TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    -- read from here next; NULL: from the source's `since`
    watermark       TIMESTAMPTZ,
    last_run_at     TIMESTAMPTZ,
    last_success_at TIMESTAMPTZ,
    last_error      TEXT,
    read            BIGINT      NOT NULL DEFAULT 0,
    opt_outs        BIGINT      NOT NULL DEFAULT 0,
    confirmed       BIGINT      NOT NULL DEFAULT 0,
    ignored         BIGINT      NOT NULL DEFAULT 0
);

-- Each record a source read (VAN: VAN ID, phone and change time; Action Network: person,
-- number and modified_date), claimed in the transaction that records what it says: a
-- record read again (after a crash, in the overlap behind a watermark, by a second run at
-- once) records nothing twice.
CREATE TABLE source_records (
    source  TEXT NOT NULL,
    record  TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, record)
);
