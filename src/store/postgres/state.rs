//! `daemon_state`: small durable facts of the daemon, by key, shared by every replica.

/// Counts a failure of the token `$1` (blocked from `$2` failures on until `$3`, at `$4`)
/// and returns the new value: [`crate::store::StateStore::count_token_failure`].
pub(crate) const TOKEN_FAILURE: &str = "INSERT INTO daemon_state (key, value, updated_at)
         VALUES ($1, jsonb_build_object('consecutive_failures', 1,
                                        'blocked_until', CASE WHEN 1 >= $2 THEN $3 END)::TEXT, $4)
         ON CONFLICT (key) DO UPDATE SET
             value = jsonb_build_object(
                 'consecutive_failures',
                 COALESCE((daemon_state.value::JSONB ->> 'consecutive_failures')::BIGINT, 0) + 1,
                 'blocked_until',
                 CASE WHEN COALESCE((daemon_state.value::JSONB ->>
                     'consecutive_failures')::BIGINT, 0) + 1 >= $2
                      THEN $3 ELSE daemon_state.value::JSONB ->> 'blocked_until' END)::TEXT,
             updated_at = $4
         RETURNING value";
