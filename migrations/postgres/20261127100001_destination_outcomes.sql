-- Each entry's progress at each destination (VAN, Action Network): the actions answered
-- with success so far (a bit per action of the destination's kind) and, once it has one, its
-- outcome: 'sent' (at: when the last action was answered, the compliance report's honour
-- time), 'unmatched' or 'refused' (with the reason). Written before the destination's cursor
-- moves past the entry, so that no answered action is sent again. The cursor and the state
-- are the destination's row in `subscribers`.
CREATE TABLE destination_outcomes (
    destination  TEXT    NOT NULL,
    seq          BIGINT  NOT NULL,
    actions_done BIGINT  NOT NULL DEFAULT 0,
    outcome      TEXT,
    reason       TEXT,
    at           TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (destination, seq)
);
-- The report reads every destination's outcomes of a page of opt-outs.
CREATE INDEX destination_outcomes_by_seq ON destination_outcomes (seq);
