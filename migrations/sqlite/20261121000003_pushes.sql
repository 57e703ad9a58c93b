-- Local consent changes (CLI `opt-out`/`opt-in`, admin `POST /v1/consent`) queued for the
-- service. A row is written in the same transaction as the change's ledger entry, so a change
-- is never recorded without being queued, nor queued without being recorded.
--
-- States: 'pending' (not yet accepted by the service; retried with exponential backoff at
-- next_attempt_at), 'sent' (PATCH /leads answered 2xx), 'failed' (refused for good: no such
-- lead at the service, or a 4xx other than 429), 'superseded' (a newer local change of the
-- same (organization, number) was queued before this one was sent: only the newest is sent).
--
-- The echo rule: after a PATCH the service announces the same change by webhook. A
-- consentUpdate for (organization_id, phone_number, opted_out) is the echo of the oldest
-- push with the same three values that has been attempted (attempts >= 1), is 'pending' or
-- 'sent', has no echo yet, and whose attempts span the event time (from first_attempt_at
-- minus 5 s, as the service writes whole seconds, to last_attempt_at plus 10 min). The echo
-- is still written to the ledger (source 'webhook', reason 'echo of local change seq N'),
-- but with the local change's occurred_at, so it never outranks anything the local change
-- does not; echo_ref links the push to it.
CREATE TABLE pushes (
    seq              INTEGER PRIMARY KEY,   -- the ledger entry of the local change
    organization_id  TEXT    NOT NULL,
    phone_number     TEXT    NOT NULL,
    opted_out        INTEGER NOT NULL,
    tag_id           TEXT,
    state            TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'sent', 'failed', 'superseded')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  TEXT    NOT NULL,      -- RFC 3339, UTC, milliseconds
    first_attempt_at TEXT,
    last_attempt_at  TEXT,
    last_error       TEXT,
    lead_id          TEXT,                  -- the service's lead, once known
    created_at       TEXT    NOT NULL,
    finished_at      TEXT,                  -- when it became sent or failed
    echo_ref         TEXT                   -- event_ref of the recognised echo
);
CREATE INDEX pushes_due ON pushes (next_attempt_at) WHERE state = 'pending';
CREATE INDEX pushes_by_number ON pushes (organization_id, phone_number);
CREATE INDEX pushes_by_echo ON pushes (echo_ref) WHERE echo_ref IS NOT NULL;
