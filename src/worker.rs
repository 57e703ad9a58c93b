//! The worker: applies outbox rows in receipt order, each batch in one transaction that also
//! marks its rows applied (or quarantined), so a crash at any instant neither loses nor
//! repeats an effect.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Connection, SqliteConnection, SqlitePool};
use tokio_util::sync::CancellationToken;

use crate::db;
use crate::events::{self, Event, Lead};
use crate::mirror::{self, ConsentObservation, Source, StatusObservation};
use crate::outbox::OutboxState;

/// Rows applied per transaction under load.
pub const BATCH: i64 = 1000;
/// Attempts before a row that keeps failing is quarantined.
pub const MAX_ATTEMPTS: i64 = 5;
/// Longest wait between looks at the outbox when nobody wakes the worker (rows written
/// by another process, e.g. `replay`).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// How long the worker lets new deliveries gather after being woken.
const APPLY_COALESCE: Duration = Duration::from_millis(20);
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
    #[error("lead {0} is not in the mirror; replay after reconciliation")]
    UnknownLead(String),
}

/// What a batch will do.
#[derive(Default)]
struct Plan {
    consent: Vec<ConsentObservation>,
    /// Rows that cannot be applied, with the reason.
    quarantined: Vec<(i64, String)>,
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
        let _gate = self.state.write_gate.lock().await;
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        // One row for the whole batch (bodies in hex: any bytes survive), as a row each
        // would cost a hand-over between SQLite's thread and this task.
        let mut rows: Vec<(i64, String, String, String)> = db::json_rows(
            &mut tx,
            "SELECT json_group_array(json_array(id, dedup_key, received_at, hex(body)))
             FROM (SELECT id, dedup_key, received_at, body FROM outbox
                   WHERE state = 'pending' ORDER BY id LIMIT ?)",
            limit,
        )
        .await?;
        rows.sort_unstable_by_key(|(id, ..)| *id);
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(Outcome::default());
        }
        let now = Utc::now();
        let parsed: Vec<Parsed> = rows
            .into_iter()
            .map(|(id, key, received_at, body)| {
                let received_at = DateTime::parse_from_rfc3339(&received_at)
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(now);
                let event = match hex::decode(&body) {
                    Ok(body) => events::parse(&body, received_at),
                    Err(e) => Err(events::ParseError::Stored(e.to_string())),
                };
                (id, key, event)
            })
            .collect();
        let outcome = apply_rows(&mut tx, &parsed, now, self.account_sync).await?;
        tx.commit().await?;
        self.state.settled(outcome.applied + outcome.quarantined);
        crate::metrics::global().applied(outcome.applied, outcome.quarantined);
        tracing::debug!(
            applied = outcome.applied,
            quarantined = outcome.quarantined,
            "batch applied"
        );
        Ok(outcome)
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
                        _ = self.state.committed.notified() => {
                            // Let a burst gather: one transaction (and one fsync) for many
                            // deliveries instead of one per ingest commit.
                            tokio::time::sleep(APPLY_COALESCE).await;
                        }
                        _ = tokio::time::sleep(IDLE_POLL) => {}
                    }
                }
                Ok(outcome) => {
                    backoff = FIRST_BACKOFF;
                    limit = BATCH;
                    if outcome.applied + outcome.quarantined < BATCH as u64 {
                        // Caught up: let the next deliveries gather rather than take the
                        // write lock (and an fsync) for each ingest commit.
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = tokio::time::sleep(APPLY_COALESCE) => {}
                        }
                    }
                }
                Err(error) => {
                    tracing::error!(error = %error, batch = limit, "applying the outbox failed; backing off");
                    crate::ledger::note_error(&self.pool, &format!("worker: {error}")).await;
                    if limit == 1
                        && let Err(e) = self.record_failure(&error.to_string()).await
                    {
                        tracing::error!(error = %e, "cannot record the failed attempt");
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

/// An outbox row ready to apply: its id, its dedup key (the ledger's `event_ref`) and its
/// event as parsed from the stored bytes.
pub(crate) type Parsed = (i64, String, Result<Event, events::ParseError>);

/// Applies `parsed` (rows in receipt order) inside the caller's transaction, which must
/// hold the write lock: mirror, statuses and ledger, and each row marked applied or
/// quarantined, so the caller's commit makes the whole batch take effect at once.
pub(crate) async fn apply_rows(
    conn: &mut SqliteConnection,
    parsed: &[Parsed],
    now: DateTime<Utc>,
    account_sync: bool,
) -> Result<Outcome, sqlx::Error> {
    if parsed.is_empty() {
        return Ok(Outcome::default());
    }
    let plan = plan(conn, parsed, account_sync).await?;
    let quarantined: std::collections::HashSet<i64> =
        plan.quarantined.iter().map(|(id, _)| *id).collect();
    let leads: Vec<(&Lead, DateTime<Utc>)> = parsed
        .iter()
        .filter(|(id, _, _)| !quarantined.contains(id))
        .filter_map(|(_, _, e)| match e {
            Ok(Event::Consent(c)) => c.lead.as_deref().map(|l| (l, c.occurred_at)),
            _ => None,
        })
        .collect();
    mirror::upsert_leads(&mut *conn, &leads, now).await?;
    mirror::apply_consent(&mut *conn, &plan.consent, now).await?;
    let statuses: Vec<StatusObservation> = parsed
        .iter()
        .filter_map(|(_, _, e)| match e {
            Ok(Event::MessageStatus(m)) => Some(StatusObservation {
                message: &m.message,
                lead_id: m.lead_id.as_deref(),
                organization_id: m.organization_id.as_deref(),
                occurred_at: m.occurred_at,
                source: Source::Webhook,
            }),
            _ => None,
        })
        .collect();
    mirror::apply_statuses(&mut *conn, &statuses, now).await?;
    for (id, reason) in &plan.quarantined {
        tracing::warn!(outbox_id = id, %reason, "delivery quarantined");
        quarantine(&mut *conn, *id, reason).await?;
    }
    let applied: Vec<i64> = parsed
        .iter()
        .map(|(id, _, _)| *id)
        .filter(|id| !quarantined.contains(id))
        .collect();
    sqlx::query(
        "UPDATE outbox SET state = 'applied', applied_at = ?
             WHERE id IN (SELECT value FROM json_each(?))",
    )
    .bind(db::timestamp(now))
    .bind(db::json_param(&applied)?)
    .execute(&mut *conn)
    .await?;
    Ok(Outcome {
        applied: applied.len() as u64,
        quarantined: plan.quarantined.len() as u64,
    })
}

/// Turns the parsed batch into consent observations, in receipt order, exactly as
/// applying the events one by one would: a lead id resolves to its number through the
/// mirror or an earlier event of the batch, and account sync reaches every holder of
/// the number known at that point.
async fn plan(
    conn: &mut SqliteConnection,
    parsed: &[Parsed],
    account_sync: bool,
) -> Result<Plan, sqlx::Error> {
    let consent = || {
        parsed.iter().filter_map(|(_, _, e)| match e {
            Ok(Event::Consent(c)) => Some(c),
            _ => None,
        })
    };
    let unresolved: Vec<&str> = consent()
        .filter(|c| c.organization_id.is_none() || c.phone_number.is_none())
        .filter_map(|c| c.lead_id.as_deref())
        .collect();
    let mut located = if unresolved.is_empty() {
        HashMap::new()
    } else {
        mirror::locate_leads(conn, &unresolved).await?
    };
    let mut holders = if account_sync {
        let phones: Vec<&str> = consent()
            .filter_map(|c| c.phone_number.as_deref())
            .collect();
        mirror::holders_of(conn, &phones).await?
    } else {
        HashMap::new()
    };
    // A webhook that brings back a change pushed from here is not a new change.
    let echo_keys: Vec<(&str, &str)> = consent()
        .filter_map(|c| Some((c.organization_id.as_deref()?, c.phone_number.as_deref()?)))
        .collect();
    let mut echoes = crate::pusher::EchoMatcher::load(conn, &echo_keys).await?;
    let mut plan = Plan::default();
    for (id, dedup_key, event) in parsed {
        let c = match event {
            Err(e) => {
                plan.quarantined.push((*id, e.to_string()));
                continue;
            }
            Ok(Event::MessageStatus(_)) => continue,
            Ok(Event::Consent(c)) => c,
        };
        let (org, phone) = match (&c.organization_id, &c.phone_number, &c.lead_id) {
            (Some(org), Some(phone), _) => (org.clone(), phone.clone()),
            (_, _, Some(lead)) => match located.get(lead) {
                Some(found) => found.clone(),
                None => {
                    plan.quarantined
                        .push((*id, Unappliable::UnknownLead(lead.clone()).to_string()));
                    continue;
                }
            },
            _ => {
                plan.quarantined.push((*id, "no lead id or number".into()));
                continue;
            }
        };
        if let Some(lead) = &c.lead_id {
            located.insert(lead.clone(), (org.clone(), phone.clone()));
        }
        let mut targets = vec![(org.clone(), c.lead_id.clone())];
        if account_sync {
            let known = holders.entry(phone.clone()).or_default();
            for (other, lead) in known.iter() {
                if !targets.iter().any(|(o, _)| o == other) {
                    targets.push((other.clone(), lead.clone()));
                }
            }
            if !known.iter().any(|(o, _)| *o == org) {
                known.push((org.clone(), c.lead_id.clone()));
            }
        }
        for (organization_id, lead_id) in targets {
            let mut observation = ConsentObservation {
                organization_id,
                phone_number: phone.clone(),
                lead_id,
                opted_out: c.opted_out,
                occurred_at: c.occurred_at,
                source: Source::Webhook,
                event_ref: dedup_key.clone(),
                tag_id: c.tag_id.clone(),
                reason: None,
            };
            if let Some(echo) = echoes.take(conn, &observation).await? {
                observation.occurred_at = echo.occurred_at;
                observation.reason = Some(crate::pusher::echo_reason(echo.seq));
            }
            plan.consent.push(observation);
        }
    }
    Ok(plan)
}

async fn quarantine(conn: &mut SqliteConnection, id: i64, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE outbox SET state = 'quarantined', attempts = attempts + 1, last_error = ? WHERE id = ?")
        .bind(reason)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
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
