//! `daemon_state`: small durable facts of the daemon, by key.

/// Counts a failure of the token `$1` (blocked from `$2` failures on until `$3`, at `$4`)
/// and returns the new value: [`crate::store::StateStore::count_token_failure`].
pub(crate) const TOKEN_FAILURE: &str = "INSERT INTO daemon_state (key, value, updated_at)
         VALUES ($1, json_object('consecutive_failures', 1,
                                 'blocked_until', CASE WHEN 1 >= $2 THEN $3 END), $4)
         ON CONFLICT (key) DO UPDATE SET
             value = json_object(
                 'consecutive_failures',
                 COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'), 0) + 1,
                 'blocked_until',
                 CASE WHEN COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'),
                     0) + 1 >= $2
                      THEN $3 ELSE json_extract(daemon_state.value, '$.blocked_until') END),
             updated_at = $4
         RETURNING value";
