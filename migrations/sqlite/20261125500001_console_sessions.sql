-- The console's sign-in sessions (src/admin/console). The cookie holds a random id; only
-- its SHA-256 is kept here, so this table alone signs no one in. Times are Unix
-- milliseconds.
CREATE TABLE console_sessions (
    id_hash    TEXT PRIMARY KEY,
    -- The admin token's name: the actor of the changes made in the session.
    actor      TEXT    NOT NULL,
    -- SHA-256 of the token signed in with: the session ends when the token is removed
    -- from admin.tokens.
    token_hash TEXT    NOT NULL,
    -- The form token every POST of the session must carry.
    csrf       TEXT    NOT NULL,
    created_ms INTEGER NOT NULL,
    -- Last use (written at most once a minute); the session lapses when idle too long.
    seen_ms    INTEGER NOT NULL,
    -- Signed out by then, however active.
    expires_ms INTEGER NOT NULL
);
