//! The read side on PostgreSQL: after the same deliveries and local changes, every reader
//! (consent, lookup, history, the change feed, events, export, the mirror's leads and
//! messages, status) returns on PostgreSQL what it returns on SQLite, to the character.

use outreach_sync::model::{AccountId, PushState, Timestamp};
use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use outreach_sync::apply::{LocalChange, local};
use outreach_sync::export::{self, Dataset, Format};
use outreach_sync::ledger;
use outreach_sync::outbox::OutboxState;
use outreach_sync::store::Pool;
use outreach_sync::worker::{Outcome, Worker};
use serde_json::{Value, json};
use sqlx::{PgPool, SqlitePool};

use crate::postgres::TestDatabase;
use crate::postgres_apply::{deliver_pg, deliver_sqlite, mixed_deliveries, postgres, sqlite};

/// The same history on both backends.
struct Both {
    database: TestDatabase,
    pg: PgPool,
    lite: SqlitePool,
    _dir: tempfile::TempDir,
}

/// When the local changes are made.
const LOCAL_AT: &str = "2026-11-21T11:00:00.123Z";
/// When the service was asked for the local changes that were attempted.
const ATTEMPTED_AT: &str = "2026-11-21T11:00:00.500Z";

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

/// The service's echo of the local change of `+15550000002` in `o2`, a second after it.
fn echo() -> Value {
    json!({"type": "consentUpdate-v1", "id": "evt_echo", "createdAt": "2026-11-21T11:00:01Z",
           "data": {"organizationId": "o2", "phoneNumber": "+15550000002", "globalOptedOut": false}})
}

/// A delivery left unapplied, for the backlog.
fn late() -> Value {
    json!({"eventType": "consentUpdate-v1", "id": "evt_late", "createdAt": "2026-11-21T11:30:00Z",
           "data": {"organizationId": "o1", "phoneNumber": "+15550000009", "globalOptedOut": true}})
}

fn changes() -> [LocalChange; 3] {
    let change = |org: &str, phone: &str, opted_out: bool, tag: Option<&str>| LocalChange {
        account: outreach_sync::model::AccountId::default_account(),
        organization_id: org.into(),
        phone_number: phone.into(),
        opted_out,
        tag_id: tag.map(Into::into),
        reason: Some("asked by phone".into()),
        actor: "cli:test".into(),
    };
    [
        change("o1", "+15550000001", true, None),
        change("o2", "+15550000002", false, None),
        change("o0", "+15550000003", true, Some("t_opt_out")),
    ]
}

/// What a pass of the pusher would have left: the second change sent (so the service's
/// echo is recognised), the third tried once and failed for now.
fn pushes_attempted(second: i64, third: i64) -> [String; 2] {
    [
        format!(
            "UPDATE pushes SET attempts = 1, first_attempt_at = '{ATTEMPTED_AT}',
                 last_attempt_at = '{ATTEMPTED_AT}', state = 'sent', finished_at = '{ATTEMPTED_AT}'
             WHERE seq = {second}"
        ),
        format!(
            "UPDATE pushes SET attempts = 1, first_attempt_at = '{ATTEMPTED_AT}',
                 last_attempt_at = '{ATTEMPTED_AT}', last_error = 'service unavailable'
             WHERE seq = {third}"
        ),
    ]
}

/// A failure recorded, a finished leads pass and one interrupted, at fixed times.
const FOR_STATUS: [&str; 3] = [
    "INSERT INTO daemon_state (key, value, updated_at)
     VALUES ('last_error', 'worker: disk full', '2026-11-21T12:30:00.250Z')",
    "INSERT INTO reconcile_organizations (organization_id, pass_id, finished_at, leads_scanned, repaired, error)
     VALUES ('o1', 'pass_1', '2026-11-21T09:00:00.000Z', 12, 3, NULL),
            ('o2', 'pass_1', '2026-11-21T09:00:05.678Z', 4, 0, 'HTTP 503')",
    "INSERT INTO reconcile_checkpoints (organization_id, pass_id, cursor, leads_scanned, repaired, started_at, updated_at)
     VALUES ('o0', 'pass_2', 'cursor_1', 2, 0, '2026-11-21T12:00:00.000Z', '2026-11-21T12:01:00.000Z')",
];

fn worker(pool: impl Into<Pool>) -> Worker {
    Worker::new(pool, Arc::new(OutboxState::default()), true)
}

async fn history_on_pg(pg: &PgPool) -> Outcome {
    deliver_pg(pg, &mixed_deliveries()).await;
    let mut outcome = worker(pg).drain_in_order().await.unwrap();
    let mut seqs = Vec::new();
    for change in changes() {
        let recorded = local::record_local(pg, &change, at(LOCAL_AT))
            .await
            .unwrap();
        seqs.push(recorded.seq);
    }
    for sql in pushes_attempted(seqs[1], seqs[2]) {
        sqlx::query(&sql).execute(pg).await.unwrap();
    }
    deliver_pg(pg, &[echo()]).await;
    outcome.applied += worker(pg).drain_in_order().await.unwrap().applied;
    for sql in FOR_STATUS {
        sqlx::query(sql).execute(pg).await.unwrap();
    }
    deliver_pg(pg, &[late()]).await;
    outcome
}

async fn history_on_sqlite(lite: &SqlitePool) -> Outcome {
    deliver_sqlite(lite, &mixed_deliveries()).await;
    let mut outcome = worker(lite).drain_in_order().await.unwrap();
    let mut seqs = Vec::new();
    for change in changes() {
        let recorded = local::record_local(lite, &change, at(LOCAL_AT))
            .await
            .unwrap();
        seqs.push(recorded.seq);
    }
    for sql in pushes_attempted(seqs[1], seqs[2]) {
        sqlx::query(&sql).execute(lite).await.unwrap();
    }
    deliver_sqlite(lite, &[echo()]).await;
    outcome.applied += worker(lite).drain_in_order().await.unwrap().applied;
    for sql in FOR_STATUS {
        sqlx::query(sql).execute(lite).await.unwrap();
    }
    deliver_sqlite(lite, &[late()]).await;
    outcome
}

/// Both backends after the same deliveries, local changes and pushes; `None` without a
/// PostgreSQL server.
async fn both() -> Option<Both> {
    let (database, pg) = postgres().await?;
    let (dir, lite) = sqlite().await;
    let on_pg = history_on_pg(&pg).await;
    let on_lite = history_on_sqlite(&lite).await;
    assert_eq!(on_pg, on_lite);
    assert_eq!(on_pg.applied, 125, "{on_pg:?}");
    Some(Both {
        database,
        pg,
        lite,
        _dir: dir,
    })
}

impl Both {
    /// What `read` gives on PostgreSQL and on SQLite.
    async fn read<T, F, Fut>(&self, read: F) -> (T, T)
    where
        F: Fn(Pool) -> Fut,
        Fut: Future<Output = T>,
    {
        (
            read(Pool::from(&self.pg)).await,
            read(Pool::from(&self.lite)).await,
        )
    }

    async fn drop(self) {
        self.database.drop().await;
    }
}

/// A time as stored on SQLite: RFC 3339, UTC, milliseconds.
fn assert_stored_time(text: &str) {
    assert!(
        text.len() == 24 && text.ends_with('Z') && text.as_bytes()[19] == b'.',
        "{text:?} is not written as SQLite stores times"
    );
    DateTime::parse_from_rfc3339(text).unwrap();
}

/// A ledger entry without what differs by nature between two runs: the worker's clock
/// (the time it recorded an entry) and the random refs of local changes.
fn comparable_entry(source: &str, recorded_at: &mut String, event_ref: &mut String) {
    assert_stored_time(recorded_at);
    if source != "local" {
        *recorded_at = "<the worker's clock>".into();
    }
    if event_ref.starts_with("local:") {
        *event_ref = "local:<random>".into();
    }
}

fn comparable_entries(mut entries: Vec<ledger::LedgerEntry>) -> Vec<ledger::LedgerEntry> {
    for e in &mut entries {
        let mut recorded_at = e.recorded_at.to_string();
        comparable_entry(e.source.as_str(), &mut recorded_at, &mut e.event_ref);
        if e.recorded_at != recorded_at.as_str() {
            // The worker's clock.
            e.recorded_at = Timestamp(chrono::DateTime::UNIX_EPOCH);
        }
    }
    entries
}

#[tokio::test]
async fn consent_lookup_and_history_read_the_same_on_postgres_as_on_sqlite() {
    let Some(both) = both().await else {
        return;
    };
    let phones = [
        "+15550000000",
        "+15550000001",
        "+15550000002",
        "+15550000003",
    ];
    for phone in phones {
        for org in [None, Some("o1"), Some("o2")] {
            let (pg, lite) = both
                .read(|pool| async move { ledger::current(pool, phone, org).await.unwrap() })
                .await;
            assert_eq!(pg, lite, "consent of {phone} in {org:?}");
            if org.is_none() {
                assert!(pg.len() >= 2, "{phone}: {pg:?}");
            }
            let (pg, lite) = both
                .read(|pool| async move { ledger::history(pool, phone, org).await.unwrap() })
                .await;
            assert_eq!(
                comparable_entries(pg.clone()),
                comparable_entries(lite),
                "history of {phone} in {org:?}"
            );
            if org.is_none() {
                assert!(pg.len() >= 10, "{phone}: {pg:?}");
            }
        }
    }
    let (pg, _) = both
        .read(|pool| async move {
            ledger::current(pool, "+15550000001", Some("o1"))
                .await
                .unwrap()
        })
        .await;
    assert_eq!(pg.len(), 1);
    assert_eq!(
        (
            &*pg[0].changed_at.to_string(),
            pg[0].source.as_str(),
            pg[0].opted_out
        ),
        (LOCAL_AT, "local", true),
        "the local change is the current state, its time written as on SQLite"
    );
    assert_eq!(pg[0].lead_id.as_deref(), Some("lead_1"));

    // Requested order, duplicates removed by the caller, unknown numbers left out.
    let asked = [
        "+15550000003",
        "+19990000000",
        "+15550000001",
        "+15550000000",
    ];
    let (pg, lite) = both
        .read(|pool| async move { ledger::lookup(pool, &asked, None).await.unwrap() })
        .await;
    assert_eq!(pg, lite);
    assert_eq!(
        pg.first().map(|r| r.phone_number.as_str()),
        Some("+15550000003")
    );
    assert!(pg.iter().all(|r| r.phone_number != "+19990000000"));
    assert!(pg.len() >= 6, "{pg:?}");
    let (pg, lite) = both
        .read(|pool| async move { ledger::lookup(pool, &asked, Some("o2")).await.unwrap() })
        .await;
    assert_eq!(pg, lite);
    assert!(!pg.is_empty() && pg.iter().all(|r| r.organization_id == "o2"));

    // Push states and the recognised echo come out on the entries.
    let (pg, _) = both
        .read(|pool| async move {
            ledger::history(pool, "+15550000002", Some("o2"))
                .await
                .unwrap()
        })
        .await;
    let local = pg.iter().find(|e| e.source == "local").unwrap();
    assert_eq!(local.push.map(PushState::as_str), Some("sent"));
    let echo = pg.iter().find(|e| e.event_ref == "event:evt_echo").unwrap();
    assert_eq!(echo.echo_of, Some(local.seq), "{pg:#?}");
    assert!(pg.iter().any(|e| e.superseded), "{pg:#?}");
    both.drop().await;
}

#[tokio::test]
async fn the_change_feed_and_stored_events_read_the_same_on_postgres_as_on_sqlite() {
    let Some(both) = both().await else {
        return;
    };
    let total = ledger::changes(&both.pg, 0, 10_000).await.unwrap().len() as i64;
    assert!(total > 100, "{total} entries");
    for (after, limit) in [(0, 10_000), (0, 7), (40, 25), (total - 4, 10), (10_000, 5)] {
        let (pg, lite) = both
            .read(|pool| async move { ledger::changes(pool, after, limit).await.unwrap() })
            .await;
        assert_eq!(
            comparable_entries(pg.clone()),
            comparable_entries(lite),
            "after {after}, limit {limit}"
        );
        assert_eq!(
            pg.len() as i64,
            limit.min((total - after).max(0)),
            "after {after}"
        );
        if let Some(first) = pg.first() {
            assert_eq!(first.seq, after + 1);
        }
    }
    let (pg, _) = both
        .read(|pool| async move { ledger::changes(pool, 0, 10_000).await.unwrap() })
        .await;
    let locals: Vec<_> = pg.iter().filter(|e| e.source == "local").collect();
    assert_eq!(locals.len(), 3);
    assert_eq!(
        locals
            .iter()
            .map(|e| e.push.map(PushState::as_str))
            .collect::<Vec<_>>(),
        [Some("pending"), Some("sent"), Some("pending")]
    );
    assert!(
        locals
            .iter()
            .all(|e| e.occurred_at == LOCAL_AT && e.recorded_at == LOCAL_AT)
    );

    for quarantined_only in [false, true] {
        let (pg, lite) = both
            .read(|pool| async move {
                let events = ledger::events(pool, quarantined_only, 500).await.unwrap();
                serde_json::to_value(events).unwrap()
            })
            .await;
        // Outbox ids are the database's: a delivery ignored as a duplicate uses one up on
        // PostgreSQL, not on SQLite. Everything else, and the order, is the same.
        let without_ids = |events: &Value| -> Vec<Value> {
            let events = events.as_array().unwrap();
            let ids: Vec<i64> = events.iter().map(|e| e["id"].as_i64().unwrap()).collect();
            assert!(ids.windows(2).all(|w| w[0] > w[1]), "newest first: {ids:?}");
            events
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    e.as_object_mut().unwrap().remove("id");
                    e
                })
                .collect()
        };
        assert_eq!(without_ids(&pg), without_ids(&lite));
        let events = pg.as_array().unwrap();
        if quarantined_only {
            assert_eq!(events.len(), 2, "{pg:#}");
            assert!(events.iter().all(|e| e["state"] == "quarantined"));
            assert!(events.iter().all(|e| e["lastError"].is_string()));
        } else {
            assert_eq!(events.len(), 128, "{pg:#}");
            assert_eq!(events[0]["dedupKey"], "event:evt_late");
            assert_eq!(events[0]["state"], "pending");
            assert_eq!(
                events[0]["eventType"], "consentUpdate-v1",
                "from `eventType`"
            );
            assert!(events.iter().any(|e| e["eventType"] == "messageStatus-v1"));
            assert!(
                events
                    .iter()
                    .any(|e| e["eventType"] == "surely-not-an-event")
            );
        }
        for e in events {
            assert_eq!(e["receivedAt"], "2026-11-21T12:00:00.000Z");
        }
    }
    let (pg, lite) = both
        .read(|pool| async move {
            serde_json::to_value(ledger::events(pool, false, 3).await.unwrap()).unwrap()
        })
        .await;
    assert_eq!(pg.as_array().unwrap().len(), 3);
    assert_eq!(pg[0]["dedupKey"], lite[0]["dedupKey"]);
    both.drop().await;
}

/// `dataset` exported in `format` from `pool`, with the rows written.
async fn exported(
    pool: Pool,
    dataset: Dataset,
    format: Format,
    since: Option<i64>,
) -> (u64, String) {
    let mut out = Vec::new();
    let rows = export::export(pool, dataset, format, since, &mut out)
        .await
        .unwrap();
    (rows, String::from_utf8(out).unwrap())
}

/// An export of the ledger without what differs by nature between two runs (see
/// [`comparable_entry`]).
fn comparable_ledger_export(format: Format, text: &str) -> Vec<String> {
    let lines = text.lines();
    match format {
        Format::Jsonl => lines
            .map(|line| {
                let mut entry: Value = serde_json::from_str(line).unwrap();
                let source = entry["source"].as_str().unwrap().to_owned();
                let mut recorded_at = entry["recordedAt"].as_str().unwrap().to_owned();
                let mut event_ref = entry["eventRef"].as_str().unwrap().to_owned();
                comparable_entry(&source, &mut recorded_at, &mut event_ref);
                (entry["recordedAt"], entry["eventRef"]) = (recorded_at.into(), event_ref.into());
                entry.to_string()
            })
            .collect(),
        Format::Csv => lines
            .enumerate()
            .map(|(i, line)| {
                if i == 0 {
                    return line.to_owned();
                }
                // No field of these entries needs quoting.
                let mut fields: Vec<String> = line.split(',').map(str::to_owned).collect();
                assert_eq!(fields.len(), 12, "{line}");
                let (mut recorded_at, mut event_ref) = (fields[6].clone(), fields[8].clone());
                comparable_entry(&fields[7], &mut recorded_at, &mut event_ref);
                (fields[6], fields[8]) = (recorded_at, event_ref);
                fields.join(",")
            })
            .collect(),
    }
}

#[tokio::test]
async fn exports_are_the_same_on_postgres_as_on_sqlite_in_each_format() {
    let Some(both) = both().await else {
        return;
    };
    let total = ledger::changes(&both.pg, 0, 10_000).await.unwrap().len() as i64;
    assert!(total > 100, "{total} entries");
    for format in [Format::Csv, Format::Jsonl] {
        for since in [None, Some(60), Some(10_000)] {
            let ((pg_rows, pg), (lite_rows, lite)) = both
                .read(|pool| exported(pool, Dataset::Consent, format, since))
                .await;
            assert_eq!(pg, lite, "consent in {format:?} since {since:?}");
            assert_eq!(pg_rows, lite_rows);
            if since != Some(10_000) {
                assert!(pg_rows >= 5, "consent in {format:?} since {since:?}: {pg}");
            }
            if format == Format::Csv {
                assert!(pg.starts_with(
                    "organization_id,lead_id,phone_number,opted_out,changed_at,source\r\n"
                ));
            }

            let ((pg_rows, pg), (lite_rows, lite)) = both
                .read(|pool| exported(pool, Dataset::Ledger, format, since))
                .await;
            assert_eq!(
                comparable_ledger_export(format, &pg),
                comparable_ledger_export(format, &lite),
                "ledger in {format:?} since {since:?}"
            );
            assert_eq!(pg_rows, lite_rows);
            let expected = (total - since.unwrap_or(0)).max(0);
            assert_eq!(
                pg_rows as i64, expected,
                "ledger in {format:?} since {since:?}"
            );
        }
    }
    let ((_, pg), _) = both
        .read(|pool| exported(pool, Dataset::Consent, Format::Csv, None))
        .await;
    assert!(
        pg.contains(&format!("o1,lead_1,+15550000001,true,{LOCAL_AT},local\r\n")),
        "{pg}"
    );
    both.drop().await;
}

#[tokio::test]
async fn leads_and_messages_read_the_same_on_postgres_as_on_sqlite() {
    let Some(both) = both().await else {
        return;
    };
    for id in ["lead_1", "lead_2", "lead_nobody"] {
        let (pg, lite) = both
            .read(|pool| async move {
                ledger::lead(pool, id, &AccountId::default_account())
                    .await
                    .unwrap()
            })
            .await;
        assert_eq!(pg, lite, "{id}");
        assert_eq!(pg.is_some(), id != "lead_nobody");
    }
    let (pg, _) = both
        .read(|pool| async move {
            ledger::lead(pool, "lead_1", &AccountId::default_account())
                .await
                .unwrap()
        })
        .await;
    assert_eq!(
        pg.unwrap(),
        json!({"id": "lead_1", "type": "lead", "phoneNumber": "+15550000001", "organizationId": "o1",
               "activeGroupIds": ["g1"], "inactiveGroupIds": [], "customFields": {"district": "7"},
               "firstName": "Ada", "lastName": null, "notes": null, "followUp": null, "email": null,
               "postalCode": null, "phoneNumberType": null, "tagIds": ["t1"],
               "globalOptedOut": true, "createdAt": "2026-01-01T00:00:00Z",
               "accountId": "default"})
    );
    for org in [None, Some("o2"), Some("o9")] {
        let (pg, lite) = both
            .read(|pool| async move { ledger::leads(pool, "+15550000001", org).await.unwrap() })
            .await;
        assert_eq!(pg, lite, "{org:?}");
        let expected = match org {
            None => vec!["lead_1", "lead_2"],
            Some("o2") => vec!["lead_2"],
            _ => vec![],
        };
        let ids: Vec<&str> = pg.iter().map(|l| l["id"].as_str().unwrap()).collect();
        assert_eq!(ids, expected);
    }

    for id in ["m0", "m1", "m2", "m3", "m4", "m_nobody"] {
        let (pg, lite) = both
            .read(|pool| async move {
                ledger::message(pool, id, &AccountId::default_account())
                    .await
                    .unwrap()
            })
            .await;
        assert_eq!(pg.is_some(), id != "m_nobody", "{id}");
        // `updatedAt` is the worker's clock: written alike, not equal.
        let comparable = |m: Option<Value>| {
            m.map(|mut m| {
                assert_stored_time(m["updatedAt"].as_str().unwrap());
                m["updatedAt"] = "<the worker's clock>".into();
                m
            })
        };
        assert_eq!(comparable(pg.clone()), comparable(lite), "{id}");
        if let Some(m) = pg {
            assert_stored_time(m["statusAt"].as_str().unwrap());
            assert!(m["terminal"].is_boolean(), "{m}");
            assert_eq!(m["type"], "SMS");
        }
    }
    both.drop().await;
}

#[tokio::test]
async fn status_reads_the_same_on_postgres_as_on_sqlite() {
    let Some(both) = both().await else {
        return;
    };
    let total = ledger::changes(&both.pg, 0, 10_000).await.unwrap().len();
    // The chain's hashes differ: entries carry the writer's clock (`recordedAt`) and local
    // changes a random event ref. Its head is the last entry on both.
    let (pg, lite) = both
        .read(|pool| async move {
            let mut status = serde_json::to_value(ledger::status(pool).await.unwrap()).unwrap();
            assert_eq!(status["chainHead"]["hash"].as_str().map(str::len), Some(64));
            status["chainHead"]["hash"] = "<its hash>".into();
            status
        })
        .await;
    assert_eq!(pg, lite);
    assert_eq!(
        pg,
        json!({
            "chainHead": {"seq": total, "hash": "<its hash>"},
            "backlog": 1, "quarantined": 2, "applied": 125, "ledgerEntries": total,
            // Every message got a final status (sent, delivered or failed).
            "leads": 2, "messages": 5, "openMessages": 0,
            "oldestPendingAt": "2026-11-21T12:00:00.000Z",
            "lastError": {"at": "2026-11-21T12:30:00.250Z", "message": "worker: disk full"},
            "reconciliation": [
                {"organizationId": "o1", "finishedAt": "2026-11-21T09:00:00.000Z",
                 "leadsScanned": 12, "repaired": 3, "error": null},
                {"organizationId": "o2", "finishedAt": "2026-11-21T09:00:05.678Z",
                 "leadsScanned": 4, "repaired": 0, "error": "HTTP 503"},
            ],
            "reconciliationInProgress": ["o0"],
            "pushes": {"pending": 2, "sent": 1, "failed": 0, "retrying": 1,
                       "oldestPendingAt": LOCAL_AT, "lastPushError": "service unavailable"},
            // No replica has a heartbeat here.
            "replicas": [],
            // No subscriber is configured.
            "subscribers": [],
            // `webhooks check` never ran.
            "registrationCheck": null,
        })
    );
    let (pg, lite) = both
        .read(|pool| async move {
            serde_json::to_value(outreach_sync::pusher::counts(pool).await.unwrap()).unwrap()
        })
        .await;
    assert_eq!(pg, lite);
    assert_eq!(pg["pending"], 2);
    both.drop().await;
}
