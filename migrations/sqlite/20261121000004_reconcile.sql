-- Where an interrupted leads pass resumes: one row per organization being scanned.
CREATE TABLE reconcile_checkpoints (
    organization_id TEXT PRIMARY KEY,
    pass_id         TEXT NOT NULL,
    cursor          TEXT,
    leads_scanned   INTEGER NOT NULL DEFAULT 0,
    repaired        INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

-- The last completed leads pass of each organization, for `status`.
CREATE TABLE reconcile_organizations (
    organization_id TEXT PRIMARY KEY,
    pass_id         TEXT NOT NULL,
    finished_at     TEXT NOT NULL,
    leads_scanned   INTEGER NOT NULL,
    repaired        INTEGER NOT NULL,
    error           TEXT
);

-- Every pass, with its summary.
CREATE TABLE reconcile_passes (
    id          TEXT PRIMARY KEY,
    started_at  TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    summary     TEXT NOT NULL  -- JSON
);
