//! The worker: applies outbox rows in receipt order, each batch in one transaction that also
//! marks its rows applied (or quarantined), so a crash at any instant neither loses nor
//! repeats an effect.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::db;
use crate::events::{self, ConsentEvent, Event, MessageStatusEvent};
use crate::mirror::{self, ConsentChange, Source, StatusChange};
use crate::outbox::OutboxState;

/// Rows applied per transaction under load.
pub const BATCH: i64 = 500;
/// Attempts before a row that keeps failing is quarantined.
pub const MAX_ATTEMPTS: i64 = 5;
/// Longest wait between looks at the outbox when nobody wakes the worker (rows written
/// by another process, e.g. `replay`).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// First pause after a failed batch; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What one call of [`Worker::try_execute_task`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    pub applied: u64,
    pub quarantined: u64,
}

impl Outcome {
    pub fn is_idle(&self) -> bool {
        self.applied == 0 && self.quarantined == 0
    }
}

/// Why a row cannot be applied as it is; the row is quarantined with this reason.
#[derive(Debug, thiserror::Error)]
enum Unappliable {
    #[error("{0}")]
    Parse(#[from] events::ParseError),
    #[error("lead {0} is not in the mirror; replay after reconciliation")]
    UnknownLead(String),
}

/// Applies the outbox.
#[derive(Clone)]
pub struct Worker {
    pool: SqlitePool,
    state: Arc<OutboxState>,
    account_sync: bool,
}

impl Worker {
    pub fn new(pool: SqlitePool, state: Arc<OutboxState>, account_sync: bool) -> Self {
        Self {
            pool,
            state,
            account_sync,
        }
    }

    /// Applies at most `limit` pending rows in one transaction.
    pub async fn try_execute_task(&self, limit: i64) -> Result<Outcome, sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let rows: Vec<(i64, String, String, Vec<u8>)> = sqlx::query_as(
            "SELECT id, dedup_key, received_at, body FROM outbox
             WHERE state = 'pending' ORDER BY id LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let now = Utc::now();
        let mut outcome = Outcome::default();
        let mut applied_ids = Vec::with_capacity(rows.len());
        for (id, dedup_key, received_at, body) in rows {
            let received_at = DateTime::parse_from_rfc3339(&received_at)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(now);
            let span = tracing::debug_span!("apply", outbox_id = id, %dedup_key);
            let applied = self
                .apply_row(&mut tx, &dedup_key, &body, received_at, now)
                .instrument(span)
                .await?;
            match applied {
                Ok(()) => applied_ids.push(id),
                Err(reason) => {
                    tracing::warn!(outbox_id = id, %dedup_key, %reason, "delivery quarantined");
                    quarantine(&mut tx, id, &reason.to_string()).await?;
                    outcome.quarantined += 1;
                }
            }
        }
        if !applied_ids.is_empty() {
            sqlx::query(
                "UPDATE outbox SET state = 'applied', applied_at = ?
                 WHERE id IN (SELECT value FROM json_each(?))",
            )
            .bind(db::timestamp(now))
            .bind(serde_json::to_string(&applied_ids).unwrap_or_else(|_| "[]".into()))
            .execute(&mut *tx)
            .await?;
            outcome.applied = applied_ids.len() as u64;
        }
        tx.commit().await?;
        self.state.settled(outcome.applied + outcome.quarantined);
        Ok(outcome)
    }

    /// Applies one row inside the caller's transaction. The outer error is a database
    /// failure (the batch is retried); the inner one makes the row quarantined.
    async fn apply_row(
        &self,
        conn: &mut SqliteConnection,
        dedup_key: &str,
        body: &[u8],
        received_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Unappliable>, sqlx::Error> {
        let event = match events::parse(body, received_at) {
            Ok(event) => event,
            Err(e) => return Ok(Err(e.into())),
        };
        match event {
            Event::Consent(e) => self.apply_consent_event(conn, &e, dedup_key, now).await,
            Event::MessageStatus(e) => {
                apply_status_event(conn, &e, now).await?;
                Ok(Ok(()))
            }
        }
    }

    async fn apply_consent_event(
        &self,
        conn: &mut SqliteConnection,
        e: &ConsentEvent,
        event_ref: &str,
        now: DateTime<Utc>,
    ) -> Result<Result<(), Unappliable>, sqlx::Error> {
        if let Some(lead) = &e.lead {
            mirror::upsert_lead(conn, lead, e.occurred_at, now).await?;
        }
        let Some((organization_id, phone_number, lead_id)) = resolve(conn, e).await? else {
            let id = e.lead_id.clone().unwrap_or_default();
            return Ok(Err(Unappliable::UnknownLead(id)));
        };
        let mut targets = vec![(organization_id, lead_id)];
        if self.account_sync {
            for (org, lead) in mirror::account_sync_targets(conn, &phone_number).await? {
                if !targets.iter().any(|(o, _)| *o == org) {
                    targets.push((org, lead));
                }
            }
        }
        for (organization_id, lead_id) in &targets {
            let change = ConsentChange {
                organization_id,
                phone_number: &phone_number,
                lead_id: lead_id.as_deref(),
                opted_out: e.opted_out,
                occurred_at: e.occurred_at,
                source: Source::Webhook,
                event_ref,
                tag_id: e.tag_id.as_deref(),
                reason: None,
            };
            let applied = mirror::apply_consent(conn, &change, now).await?;
            tracing::debug!(organization_id, lead_id = ?lead_id, current = applied.current, superseded = applied.superseded, "consent applied");
        }
        Ok(Ok(()))
    }

    /// Applies until the outbox is empty; for tests, `replay` and benchmarks.
    pub async fn drain(&self) -> Result<Outcome, sqlx::Error> {
        let mut total = Outcome::default();
        loop {
            let outcome = self.try_execute_task(BATCH).await?;
            if outcome.is_idle() {
                return Ok(total);
            }
            total.applied += outcome.applied;
            total.quarantined += outcome.quarantined;
        }
    }

    /// Runs until `shutdown`, woken by every commit of the ingest writer. A failing batch is
    /// retried alone row by row, and a row failing [`MAX_ATTEMPTS`] times is quarantined.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        let mut limit = BATCH;
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            match self.try_execute_task(limit).await {
                Ok(outcome) if outcome.is_idle() => {
                    backoff = FIRST_BACKOFF;
                    limit = BATCH;
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = self.state.committed.notified() => {}
                        _ = tokio::time::sleep(IDLE_POLL) => {}
                    }
                }
                Ok(_) => {
                    backoff = FIRST_BACKOFF;
                    limit = BATCH;
                }
                Err(error) => {
                    tracing::error!(error = %error, batch = limit, "applying the outbox failed; backing off");
                    let _ =
                        crate::ledger::record_error(&self.pool, &format!("worker: {error}")).await;
                    if limit == 1 {
                        if let Err(e) = self.record_failure(&error.to_string()).await {
                            tracing::error!(error = %e, "cannot record the failed attempt");
                        }
                    }
                    // Isolate the row at fault before the next attempt.
                    limit = 1;
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        tracing::info!("worker stopped");
    }

    async fn record_failure(&self, error: &str) -> Result<(), sqlx::Error> {
        let quarantined: Option<i64> = sqlx::query_scalar(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?1,
                 state = CASE WHEN attempts + 1 >= ?2 THEN 'quarantined' ELSE state END
             WHERE id = (SELECT MIN(id) FROM outbox WHERE state = 'pending')
             RETURNING CASE WHEN state = 'quarantined' THEN id END",
        )
        .bind(error)
        .bind(MAX_ATTEMPTS)
        .fetch_optional(&self.pool)
        .await?
        .flatten();
        if let Some(id) = quarantined {
            tracing::warn!(
                outbox_id = id,
                "delivery quarantined after {MAX_ATTEMPTS} failed attempts"
            );
            self.state.settled(1);
        }
        Ok(())
    }
}

async fn quarantine(conn: &mut SqliteConnection, id: i64, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE outbox SET state = 'quarantined', attempts = attempts + 1, last_error = ? WHERE id = ?")
        .bind(reason)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The (organization, number, lead) a consent event is about: from the event when it says,
/// else from the mirror by lead id.
async fn resolve(
    conn: &mut SqliteConnection,
    e: &ConsentEvent,
) -> Result<Option<(String, String, Option<String>)>, sqlx::Error> {
    if let (Some(org), Some(phone)) = (&e.organization_id, &e.phone_number) {
        return Ok(Some((org.clone(), phone.clone(), e.lead_id.clone())));
    }
    let Some(lead_id) = &e.lead_id else {
        return Ok(None);
    };
    let known: Option<(String, String)> = sqlx::query_as(
        "SELECT organization_id, phone_number FROM leads WHERE id = ?1
         UNION ALL
         SELECT organization_id, phone_number FROM consent_state WHERE lead_id = ?1
         LIMIT 1",
    )
    .bind(lead_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(known.map(|(org, phone)| (org, phone, Some(lead_id.clone()))))
}

async fn apply_status_event(
    conn: &mut SqliteConnection,
    e: &MessageStatusEvent,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let change = StatusChange {
        message: &e.message,
        lead_id: e.lead_id.as_deref(),
        organization_id: e.organization_id.as_deref(),
        occurred_at: e.occurred_at,
        source: Source::Webhook,
    };
    mirror::apply_message_status(conn, &change, now).await
}

/// Puts rows back in the pending state so the worker applies them again.
pub async fn requeue(pool: &SqlitePool, selection: Requeue) -> Result<u64, sqlx::Error> {
    let done = match selection {
        Requeue::Quarantined => {
            sqlx::query(
                "UPDATE outbox SET state = 'pending', attempts = 0 WHERE state = 'quarantined'",
            )
            .execute(pool)
            .await?
        }
        Requeue::Id(id) => {
            sqlx::query("UPDATE outbox SET state = 'pending', attempts = 0 WHERE id = ?")
                .bind(id)
                .execute(pool)
                .await?
        }
    };
    Ok(done.rows_affected())
}

/// Which rows `replay` re-runs.
#[derive(Debug, Clone, Copy)]
pub enum Requeue {
    Quarantined,
    Id(i64),
}
