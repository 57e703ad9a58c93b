//! Subscribers' delivery state: one text for both backends (`$N` parameters: SQLite takes
//! them too; times are Unix milliseconds from the caller).
//!
//! Every write but [`replay`](statements) names the `generation` it was decided under, so
//! an attempt that began before a replay cannot move the rewound cursor.

/// The subscriber statements for the pool type `$pool`.
macro_rules! statements {
    ($pool:ty) => {
        use crate::model::SubscriberState;

        /// Adds a state for each of `names` that has none (cursor 0: the whole ledger).
        pub async fn ensure(pool: &$pool, names: &[&str]) -> Result<(), sqlx::Error> {
            for name in names {
                sqlx::query("INSERT INTO subscribers (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
                    .bind(name)
                    .execute(pool)
                    .await?;
            }
            Ok(())
        }

        /// The state of `name`, if it was ever configured.
        pub async fn get(pool: &$pool, name: &str) -> Result<Option<SubscriberState>, sqlx::Error> {
            sqlx::query_as(
                "SELECT name, cursor, generation, disabled, failures, next_attempt_ms,
                        last_error, last_success_ms
                 FROM subscribers WHERE name = $1",
            )
            .bind(name)
            .fetch_optional(pool)
            .await
        }

        /// Moves the cursor forward to `cursor` (entries up to it were accepted, or are not
        /// the subscriber's), clearing the failures; `delivered_ms`: the last acceptance.
        pub async fn delivered(
            pool: &$pool,
            name: &str,
            generation: i64,
            cursor: i64,
            delivered_ms: Option<i64>,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(
                "UPDATE subscribers SET cursor = $3, failures = 0, next_attempt_ms = NULL,
                     last_error = NULL, last_success_ms = COALESCE($4, last_success_ms)
                 WHERE name = $1 AND generation = $2 AND cursor < $3",
            )
            .bind(name)
            .bind(generation)
            .bind(cursor)
            .bind(delivered_ms)
            .execute(pool)
            .await?;
            Ok(())
        }

        /// Counts a failed attempt; the next is due at `next_attempt_ms`.
        pub async fn failed(
            pool: &$pool,
            name: &str,
            generation: i64,
            error: &str,
            next_attempt_ms: i64,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(
                "UPDATE subscribers SET failures = failures + 1, last_error = $3,
                     next_attempt_ms = $4
                 WHERE name = $1 AND generation = $2",
            )
            .bind(name)
            .bind(generation)
            .bind(error)
            .bind(next_attempt_ms)
            .execute(pool)
            .await?;
            Ok(())
        }

        /// Stops sending to `name` (it answered 410) until a replay.
        pub async fn disable(
            pool: &$pool,
            name: &str,
            generation: i64,
            error: &str,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(
                "UPDATE subscribers SET disabled = TRUE, last_error = $3, next_attempt_ms = NULL
                 WHERE name = $1 AND generation = $2",
            )
            .bind(name)
            .bind(generation)
            .bind(error)
            .execute(pool)
            .await?;
            Ok(())
        }

        /// Sets the cursor of `name` to `cursor` (entries after it are sent again), enables it
        /// and clears its failures; false if `name` has no state.
        pub async fn replay(pool: &$pool, name: &str, cursor: i64) -> Result<bool, sqlx::Error> {
            let replayed = sqlx::query(
                "UPDATE subscribers SET cursor = $2, generation = generation + 1,
                     disabled = FALSE, failures = 0, next_attempt_ms = NULL, last_error = NULL
                 WHERE name = $1",
            )
            .bind(name)
            .bind(cursor)
            .execute(pool)
            .await?;
            Ok(replayed.rows_affected() == 1)
        }

        /// The ledger's last seq (0 when empty). Seqs become visible in order, so every
        /// entry up to it is readable.
        pub async fn ledger_head(pool: &$pool) -> Result<i64, sqlx::Error> {
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM ledger")
                .fetch_one(pool)
                .await
        }
    };
}
pub(crate) use statements;
