//! `daemon_state`: small durable facts of the daemon, by key.

crate::store::state::statements!(
    sqlx::SqlitePool,
    token_failure: "INSERT INTO daemon_state (key, value, updated_at)
         VALUES ($1, json_object('consecutive_failures', 1,
                                 'blocked_until', CASE WHEN 1 >= $2 THEN $3 END), $4)
         ON CONFLICT (key) DO UPDATE SET
             value = json_object(
                 'consecutive_failures',
                 COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'), 0) + 1,
                 'blocked_until',
                 CASE WHEN COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'), 0) + 1 >= $2
                      THEN $3 ELSE json_extract(daemon_state.value, '$.blocked_until') END),
             updated_at = $4
         RETURNING value"
);
