//! Leases and replica heartbeats: one text for both backends, which differ only in how
//! they read the database's clock. Times are Unix milliseconds on that clock, so that
//! processes with different clocks agree. (`$N` parameters: SQLite takes them too.)

use super::Error;
use super::backend::on_backend;
use super::{LeaseStore, Pool};
use crate::model::{LeaseHeld, ReplicaBeat};

/// Now, in Unix milliseconds, on the clock of `pool`'s database (each backend's
/// `leases::NOW_MS`).
fn now_ms(pool: &Pool) -> &'static str {
    on_backend!(pool, |_pool, dialect| dialect::leases::NOW_MS)
}

impl LeaseStore for Pool {
    async fn take_leases(
        &self,
        names: &[String],
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<LeaseHeld>, Error> {
        let now_ms = now_ms(self);
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            for name in names {
                let taken = sqlx::query(&format!(
                    "INSERT INTO leases (name, holder, acquired_ms, expires_ms)
                     VALUES ($1, $2, {now_ms}, {now_ms} + $3)
                     ON CONFLICT (name) DO UPDATE SET
                         holder = excluded.holder,
                         acquired_ms = excluded.acquired_ms,
                         expires_ms = excluded.expires_ms
                     WHERE leases.expires_ms <= {now_ms} OR leases.holder = excluded.holder"
                ))
                .bind(name)
                .bind(holder)
                .bind(ttl_ms)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if taken == 0 {
                    let (holder, expires_in_ms): (String, i64) = sqlx::query_as(&format!(
                        "SELECT holder, expires_ms - {now_ms} FROM leases WHERE name = $1"
                    ))
                    .bind(name)
                    .fetch_one(&mut *tx)
                    .await?;
                    tx.rollback().await?;
                    return Ok(Some(LeaseHeld {
                        name: name.clone(),
                        holder,
                        expires_in_ms,
                    }));
                }
            }
            tx.commit().await?;
            Ok(None)
        })
    }

    async fn renew_leases(
        &self,
        names: &[String],
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<String>, Error> {
        let now_ms = now_ms(self);
        on_backend!(self, |pool| {
            for name in names {
                let renewed = sqlx::query(&format!(
                    "UPDATE leases SET expires_ms = {now_ms} + $1 WHERE name = $2 AND holder = $3"
                ))
                .bind(ttl_ms)
                .bind(name)
                .bind(holder)
                .execute(pool)
                .await?;
                if renewed.rows_affected() == 0 {
                    return Ok(Some(name.clone()));
                }
            }
            Ok(None)
        })
    }

    async fn release_leases(&self, names: &[String], holder: &str) -> Result<(), Error> {
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            for name in names {
                sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
                    .bind(name)
                    .bind(holder)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(tx.commit().await?)
        })
    }

    async fn heartbeat(&self, name: &str, forget_after_ms: i64) -> Result<(), Error> {
        let now_ms = now_ms(self);
        on_backend!(self, |pool| {
            sqlx::query(&format!(
                "INSERT INTO replicas (name, started_ms, last_seen_ms) VALUES ($1, {now_ms},
                     {now_ms})
                 ON CONFLICT (name) DO UPDATE SET last_seen_ms = excluded.last_seen_ms"
            ))
            .bind(name)
            .execute(pool)
            .await?;
            sqlx::query(&format!(
                "DELETE FROM replicas WHERE last_seen_ms < {now_ms} - $1"
            ))
            .bind(forget_after_ms)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn replicas(
        &self,
        leader_lease: &str,
        listed_for_ms: i64,
    ) -> Result<Vec<ReplicaBeat>, Error> {
        let now_ms = now_ms(self);
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(&format!(
                "SELECT r.name, r.last_seen_ms, l.name IS NOT NULL AS leader
                 FROM replicas r
                 LEFT JOIN leases l ON l.name = $1 AND l.holder = r.name AND l.expires_ms > {now_ms}
                 WHERE r.last_seen_ms > {now_ms} - $2
                 ORDER BY r.name"
            ))
            .bind(leader_lease)
            .bind(listed_for_ms)
            .fetch_all(pool)
            .await?)
        })
    }
}
