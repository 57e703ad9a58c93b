-- When each subscriber acknowledged the opt-outs sent to it: a row per acknowledged request
-- that carried at least one opt-out (entries first_seq..=last_seq), written beside the
-- cursor, never in the sending path. The compliance report reads from it when each
-- destination had each opt-out; it is pruned with the consent evidence.
CREATE TABLE subscriber_acks (
    subscriber TEXT    NOT NULL,
    first_seq  INTEGER NOT NULL,
    last_seq   INTEGER NOT NULL,
    acked_at   TEXT    NOT NULL,
    PRIMARY KEY (subscriber, last_seq, first_seq)
);

-- Messages by lead: the messages sent to a number after its opt-out.
CREATE INDEX messages_by_lead ON messages (lead_id) WHERE lead_id IS NOT NULL;
