-- Replies posted to a source that hold a revocation word among other words ("please end
-- these messages", "cancel my order"): no opt-out by themselves, never dropped. Each waits
-- here for a person's decision (`outreach-sync review`), its deadline running from
-- received_at; a decision is kept with who made it, when and why.
CREATE TABLE review_replies (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    source       TEXT NOT NULL,
    -- the record's key at its source (Twilio: the MessageSid): held once
    record       TEXT NOT NULL,
    phone_number TEXT NOT NULL,
    -- the reply's text, and the revocation words it holds (a JSON array)
    body         TEXT NOT NULL,
    matched      TEXT NOT NULL,
    -- what it stands on: the post as received (JSON)
    stands_on    TEXT NOT NULL,
    received_at  TEXT NOT NULL,
    decision     TEXT CHECK (decision IN ('opt_out', 'not_opt_out')),
    decided_by   TEXT,
    decided_at   TEXT,
    reason       TEXT,
    UNIQUE (source, record)
);
CREATE INDEX review_replies_waiting ON review_replies (received_at) WHERE decision IS NULL;
