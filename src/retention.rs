//! Retention: stored deliveries go once applied and old enough (`[retention]`), so that
//! years of traffic fit on the disk. The ledger is never pruned, nor a quarantined
//! delivery, nor one not applied yet.
//!
//! Each kind has a cursor (an outbox id, in `daemon_state`): every row at or below it has
//! been looked at. A pass walks forward from it in small batches, deletes the applied rows
//! of its kind received before the cutoff, and stops at the first row received after the
//! cutoff or still pending (it goes once applied, at a later pass). Ids follow receipt, so
//! the walk reads each row once in its life and needs no index of its own. A quarantined row
//! is passed over for good: were it replayed later, it would stay.
//!
//! The messages mirror has its own retention (`messages_days`): a tracked message whose
//! status is terminal and dates (`status_at`, the event time of that status) from before its
//! cutoff goes, in batches of the same size, found through the partial index
//! `messages_done`. A non-terminal message never goes (the reconciler looks it up), nor a
//! `sent` one within the reconciler's receipt window. A late status of a pruned message
//! mirrors it again, as for a new one.

use crate::model::OutboxState;
use crate::store::RetentionStore;
use crate::store::codec;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::model::OutboxHead;
use crate::settings::RetentionSettings;
use crate::store::Pool;

/// Rows looked at per batch: each delete is a short transaction, so ingest (on SQLite, the
/// one writer) waits a few milliseconds at most.
pub const PRUNE_BATCH: i64 = 500;
/// Pause between two batches of a background pass: ingest and the worker go first.
pub const PRUNE_PAUSE: Duration = Duration::from_millis(50);
/// How often the leader runs a pass.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Free pages given back per step of SQLite's incremental vacuum (4 KiB each): a step
/// holds the write lock while it moves pages, so it stays small.
const VACUUM_PAGES: i64 = 512;

/// How long a source's record is kept (it records nothing twice meanwhile): past VAN's 90
/// days of changes, no read reaches it again. (An Action Network source resynced to before
/// that reads it as news again, and the ledger, which holds each record's entry once, takes
/// nothing twice.)
pub const SOURCE_RECORDS_DAYS: i64 = 100;

/// `daemon_state` keys of the cursors, and of the receipt time up to which applied consent
/// deliveries are gone (for the evidence bundle's note).
const STATUS_CURSOR: &str = "retention.message_status_cursor";
const CONSENT_CURSOR: &str = "retention.consent_delivery_cursor";
const CONSENT_PRUNED_BEFORE: &str = "retention.consent_pruned_before";

/// Rows pruned by their own date, a batch at a time.
#[derive(Debug, Clone, Copy)]
enum Rows {
    /// A source's records (what it recorded once), by when they were noted.
    SourceRecords,
    /// Replies decided, by when they were.
    DecidedReplies,
}

/// The kinds of stored deliveries, each with its retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    MessageStatus,
    /// Consent deliveries, and anything that is not a message status.
    Consent,
}

impl Kind {
    fn of(body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Envelope {
            #[serde(rename = "type")]
            kind: Option<serde_json::Value>,
            #[serde(rename = "eventType")]
            event_type: Option<serde_json::Value>,
        }
        let named = serde_json::from_slice::<Envelope>(body)
            .ok()
            .and_then(|e| e.kind.or(e.event_type));
        match named {
            Some(serde_json::Value::String(t)) if t == crate::events::MESSAGE_STATUS => {
                Kind::MessageStatus
            }
            _ => Kind::Consent,
        }
    }

    fn cursor_key(self) -> &'static str {
        match self {
            Kind::MessageStatus => STATUS_CURSOR,
            Kind::Consent => CONSENT_CURSOR,
        }
    }
}

/// What a pass removed (or, dry, would remove).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pruned {
    pub message_status_deliveries: u64,
    pub consent_deliveries: u64,
    /// Tracked messages removed from the mirror: terminal, unchanged for `messages_days`.
    pub messages: u64,
    /// Quarantined deliveries old enough to go, kept (they never are pruned).
    pub quarantined_kept: u64,
    /// Subscribers' acknowledgements of opt-outs as old as the consent deliveries pruned.
    pub subscriber_acks: u64,
    /// Sources' records noted more than [`SOURCE_RECORDS_DAYS`] days ago.
    pub source_records: u64,
    /// Replies decided as long ago as the consent deliveries pruned (a decided opt-out's
    /// entry keeps the reply and the decision in its evidence; one waiting never goes).
    pub decided_replies: u64,
    /// SQLite pages given back to the file system.
    pub pages_freed: i64,
    /// The longest single write (a batch's delete, or a vacuum step), in milliseconds: how
    /// long ingest may have waited on it at most (SQLite has one writer).
    pub longest_write_ms: f64,
}

impl Pruned {
    /// Rows removed (or, dry, that would be), of every kind.
    pub fn removed(&self) -> u64 {
        self.message_status_deliveries + self.consent_deliveries + self.messages
    }

    fn timed(&mut self, started: std::time::Instant) {
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        self.longest_write_ms = self.longest_write_ms.max(ms);
    }
}

/// Prunes what `settings` allows at `now`; `dry_run` counts without deleting.
#[derive(Debug, Clone)]
pub struct Pruner {
    pool: Pool,
    settings: RetentionSettings,
    /// Pause between batches (none for `prune` run by hand or in tests).
    pause: Duration,
}

impl Pruner {
    pub fn new(pool: impl Into<Pool>, settings: &RetentionSettings) -> Self {
        Self {
            pool: pool.into(),
            settings: settings.clone(),
            pause: Duration::ZERO,
        }
    }

    /// Pauses `pause` between batches, as the background pass does.
    pub fn with_pause(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self
    }

    /// One pass over both kinds of deliveries, then the finished messages.
    pub async fn prune(
        &self,
        now: DateTime<Utc>,
        dry_run: bool,
    ) -> Result<Pruned, crate::store::Error> {
        let mut pruned = Pruned::default();
        let days = |d: u32| chrono::Duration::days(i64::from(d));
        for (kind, cutoff) in [
            (
                Kind::MessageStatus,
                now - days(self.settings.message_status_days),
            ),
            (
                Kind::Consent,
                now - days(self.settings.consent_delivery_days),
            ),
        ] {
            self.walk(kind, cutoff, dry_run, &mut pruned).await?;
        }
        if !dry_run {
            let cutoff = now - days(self.settings.consent_delivery_days);
            let turn = self.pool.write_turn().await;
            pruned.subscriber_acks = self.pool.delete_acks_before(cutoff).await?;
            drop(turn);
            let records_cutoff = now - chrono::Duration::days(SOURCE_RECORDS_DAYS);
            self.prune_rows(Rows::SourceRecords, records_cutoff, &mut pruned)
                .await?;
            self.prune_rows(Rows::DecidedReplies, cutoff, &mut pruned)
                .await?;
        }
        // Never a `sent` message the reconciler still looks up for its carrier receipt,
        // however short the retention.
        let messages_cutoff =
            (now - days(self.settings.messages_days)).min(now - crate::model::RECEIPT_WINDOW);
        self.prune_messages(messages_cutoff, dry_run, &mut pruned)
            .await?;
        let removed = pruned.removed();
        if !dry_run && removed > 0 {
            self.give_space_back(&mut pruned).await?;
        }
        Ok(pruned)
    }

    async fn walk(
        &self,
        kind: Kind,
        cutoff: DateTime<Utc>,
        dry_run: bool,
        pruned: &mut Pruned,
    ) -> Result<(), crate::store::Error> {
        let key = kind.cursor_key();
        let mut cursor: i64 = match self.pool.state(key).await? {
            Some(text) => text.parse().unwrap_or(0),
            None => 0,
        };
        loop {
            let rows: Vec<OutboxHead> = self.pool.scan_outbox(cursor, PRUNE_BATCH).await?;
            let batch = Batch::of(&rows, kind, cutoff);
            if batch.last_seen.is_none() {
                return Ok(());
            }
            let removed = if dry_run {
                batch.doomed.len() as u64
            } else {
                let started = std::time::Instant::now();
                let turn = self.pool.write_turn().await;
                let removed = self.pool.delete_applied(&batch.doomed).await?;
                drop(turn);
                pruned.timed(started);
                removed
            };
            match kind {
                Kind::MessageStatus => pruned.message_status_deliveries += removed,
                Kind::Consent => pruned.consent_deliveries += removed,
            }
            pruned.quarantined_kept += batch.quarantined;
            if let Some((id, received_at)) = batch.last_seen {
                cursor = id;
                if !dry_run {
                    self.pool.set_state(key, &id.to_string()).await?;
                    if kind == Kind::Consent {
                        let at = codec::timestamp(received_at);
                        self.pool.set_state(CONSENT_PRUNED_BEFORE, &at).await?;
                    }
                }
            }
            if batch.ended || rows.len() < PRUNE_BATCH as usize {
                return Ok(());
            }
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
        }
    }

    /// Removes the finished messages whose status dates from before `cutoff`, a batch at a
    /// time (dry: counts them).
    async fn prune_messages(
        &self,
        cutoff: DateTime<Utc>,
        dry_run: bool,
        pruned: &mut Pruned,
    ) -> Result<(), crate::store::Error> {
        if dry_run {
            pruned.messages += self.pool.count_finished_messages(cutoff).await?;
            return Ok(());
        }
        loop {
            let started = std::time::Instant::now();
            let turn = self.pool.write_turn().await;
            let removed = self
                .pool
                .delete_finished_messages(cutoff, PRUNE_BATCH)
                .await?;
            drop(turn);
            pruned.timed(started);
            pruned.messages += removed;
            if removed < PRUNE_BATCH as u64 {
                return Ok(());
            }
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
        }
    }

    /// Removes the `rows` dated before `cutoff`, a batch at a time.
    async fn prune_rows(
        &self,
        rows: Rows,
        cutoff: DateTime<Utc>,
        pruned: &mut Pruned,
    ) -> Result<(), crate::store::Error> {
        loop {
            let started = std::time::Instant::now();
            let turn = self.pool.write_turn().await;
            let removed = match rows {
                Rows::SourceRecords => {
                    self.pool
                        .delete_source_records_before(cutoff, PRUNE_BATCH)
                        .await?
                }
                Rows::DecidedReplies => {
                    self.pool
                        .delete_decided_replies_before(cutoff, PRUNE_BATCH)
                        .await?
                }
            };
            drop(turn);
            pruned.timed(started);
            *match rows {
                Rows::SourceRecords => &mut pruned.source_records,
                Rows::DecidedReplies => &mut pruned.decided_replies,
            } += removed;
            if removed < PRUNE_BATCH as u64 {
                return Ok(());
            }
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
        }
    }

    /// SQLite: the incremental vacuum, a step at a time; PostgreSQL reuses freed space.
    async fn give_space_back(&self, pruned: &mut Pruned) -> Result<(), crate::store::Error> {
        let mut free = self.pool.free_pages().await?;
        while free > 0 {
            let started = std::time::Instant::now();
            let turn = self.pool.write_turn().await;
            let left = self.pool.vacuum_step(VACUUM_PAGES).await?;
            drop(turn);
            pruned.timed(started);
            // A file without incremental auto-vacuum (not switched yet) keeps its pages.
            if left >= free {
                return Ok(());
            }
            pruned.pages_freed += free - left;
            free = left;
            if !self.pause.is_zero() {
                tokio::time::sleep(self.pause).await;
            }
        }
        Ok(())
    }

    /// A pass every [`PRUNE_INTERVAL`] until `stop` (on the leader); a failed pass is
    /// logged and tried again at the next.
    pub async fn run(self, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(PRUNE_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let pass = tokio::select! {
                _ = stop.cancelled() => return,
                pass = self.prune(Utc::now(), false) => pass,
            };
            match pass {
                Ok(p) if p.removed() > 0 => {
                    tracing::info!(
                        message_status = p.message_status_deliveries,
                        consent = p.consent_deliveries,
                        messages = p.messages,
                        pages_freed = p.pages_freed,
                        "pruned stored deliveries and finished messages past their retention"
                    );
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot prune stored deliveries; trying again later");
                }
            }
        }
    }
}

/// One batch of a walk, decided.
struct Batch {
    /// Applied rows of the kind, old enough.
    doomed: Vec<i64>,
    quarantined: u64,
    /// The last row looked at for good: the cursor's next value.
    last_seen: Option<(i64, DateTime<Utc>)>,
    /// The walk stops here: a row too recent, or one not applied yet.
    ended: bool,
}

impl Batch {
    fn of(rows: &[OutboxHead], kind: Kind, cutoff: DateTime<Utc>) -> Self {
        let mut batch = Batch {
            doomed: Vec::new(),
            quarantined: 0,
            last_seen: None,
            ended: false,
        };
        for row in rows {
            if row.received_at >= cutoff || row.state == OutboxState::Pending {
                batch.ended = true;
                break;
            }
            match row.state.as_str() {
                "applied" if Kind::of(&row.body) == kind => batch.doomed.push(row.id),
                "quarantined" if Kind::of(&row.body) == kind => batch.quarantined += 1,
                _ => {}
            }
            batch.last_seen = Some((row.id, row.received_at));
        }
        batch
    }
}

/// The receipt time up to which applied consent deliveries have been pruned, if any were.
pub async fn consent_pruned_before(pool: &Pool) -> Result<Option<String>, crate::store::Error> {
    pool.state(CONSENT_PRUNED_BEFORE).await
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn a_delivery_is_a_message_status_only_when_its_type_says_so() {
        let status = br#"{"type":"messageStatus-v1","data":{}}"#;
        let status_alt = br#"{"eventType":"messageStatus-v1"}"#;
        assert_eq!(Kind::of(status), Kind::MessageStatus);
        assert_eq!(Kind::of(status_alt), Kind::MessageStatus);
        assert_eq!(Kind::of(br#"{"type":"consentUpdate-v1"}"#), Kind::Consent);
        assert_eq!(Kind::of(b"not json"), Kind::Consent);
    }
}
