//! The console's sessions, one text for both backends (`$N` parameters; times are Unix
//! milliseconds from the caller).

use super::Error;
use super::backend::on_backend;
use super::{Pool, SessionStore};
use crate::model::ConsoleSession;

impl SessionStore for Pool {
    async fn create_session(&self, session: &ConsoleSession, idle_ms: i64) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "DELETE FROM console_sessions WHERE expires_ms <= $1 OR seen_ms <= $1 - $2",
            )
            .bind(session.created_ms)
            .bind(idle_ms)
            .execute(pool)
            .await?;
            sqlx::query(
                "INSERT INTO console_sessions
                     (id_hash, actor, token_hash, csrf, created_ms, seen_ms, expires_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&session.id_hash)
            .bind(&session.actor)
            .bind(&session.token_hash)
            .bind(&session.csrf)
            .bind(session.created_ms)
            .bind(session.seen_ms)
            .bind(session.expires_ms)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn find_session(
        &self,
        id_hash: &str,
        now_ms: i64,
        idle_ms: i64,
    ) -> Result<Option<ConsoleSession>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT id_hash, actor, token_hash, csrf, created_ms, seen_ms, expires_ms
                 FROM console_sessions
                 WHERE id_hash = $1 AND expires_ms > $2 AND seen_ms > $2 - $3",
            )
            .bind(id_hash)
            .bind(now_ms)
            .bind(idle_ms)
            .fetch_optional(pool)
            .await?)
        })
    }

    async fn touch_session(&self, id_hash: &str, now_ms: i64) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query("UPDATE console_sessions SET seen_ms = $2 WHERE id_hash = $1")
                .bind(id_hash)
                .bind(now_ms)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    async fn delete_session(&self, id_hash: &str) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query("DELETE FROM console_sessions WHERE id_hash = $1")
                .bind(id_hash)
                .execute(pool)
                .await?;
            Ok(())
        })
    }
}
