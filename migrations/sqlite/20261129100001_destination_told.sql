-- What each destination was last told of each person (VAN: the VAN ID and the number;
-- Action Network: the number), so that an entry that changes nothing there (a second
-- opt-out, the service's echo, a shared copy, a reconciliation finding it) sends nothing:
-- written in the transaction that records the outcome of the entry that told it.
CREATE TABLE destination_told (
    destination TEXT    NOT NULL,
    person      TEXT    NOT NULL,
    opted_out   INTEGER NOT NULL,
    -- the entry that told it, and when it was answered (or given up)
    seq         INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    -- false: its request was sent twice and never answered (outcome `unconfirmed`)
    confirmed   INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (destination, person)
);

-- An action sent whose answer never came (no answer within the timeout): it is sent once
-- more at most (a bit per action, as actions_done).
ALTER TABLE destination_outcomes ADD COLUMN actions_unknown INTEGER NOT NULL DEFAULT 0;
-- `already`: the entry that told the destination what this one says.
ALTER TABLE destination_outcomes ADD COLUMN follows INTEGER;
