-- Each [[subscriber]]'s delivery state (src/subscribers): every consent ledger entry is
-- pushed to it in seq order, at least once. Times are Unix milliseconds.
CREATE TABLE subscribers (
    name            TEXT PRIMARY KEY,
    -- The last seq delivered (or passed over: not of the subscriber's organizations or
    -- sources). Advanced only after a 2xx.
    cursor          BIGINT NOT NULL DEFAULT 0,
    -- Raised by a replay: an attempt begun before it can no longer move the cursor.
    generation      BIGINT NOT NULL DEFAULT 0,
    -- Answered 410 Gone: nothing is sent until a replay.
    disabled        BOOLEAN NOT NULL DEFAULT FALSE,
    -- Failed attempts since the last success, and when the next one is due.
    failures        BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT,
    last_error      TEXT,
    last_success_ms BIGINT
);
