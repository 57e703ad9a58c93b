-- Work that must run in one place at a time (a reconciliation pass of an organization, and
-- later the leader's duties): a lease held until `expires_ms` (Unix milliseconds, on the
-- database's clock) and renewed while the work goes on. A holder that dies stops renewing,
-- and its lease lapses.
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    acquired_ms INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL
);
