//! Retention as a user sees it: old applied message statuses go, consent evidence stays
//! its years, quarantined and unapplied deliveries and the ledger always stay; finished
//! messages leave the mirror after `messages_days`, open ones never.

use chrono::{DateTime, Duration, Utc};
use outreach_sync::store::codec;
use std::sync::Arc;

use outreach_sync::apply::{self, LocalChange};
use outreach_sync::outbox::OutboxState;
use outreach_sync::retention::{Pruned, Pruner};
use outreach_sync::settings::Settings;
use outreach_sync::store::Pool;
use outreach_sync::worker::Worker;

use crate::common::{Backend, on_both_backends, rows, settings_on, test_settings};
use crate::postgres::TestDatabase;

const STATUS: &str =
    r#"{"type":"messageStatus-v1","id":"m","data":{"id":"m","status":"delivered"}}"#;
const CONSENT: &str =
    r#"{"type":"consentUpdate-v1","id":"c","data":{"id":"l","globalOptedOut":true}}"#;

/// A migrated database of `backend` (and its settings), with nothing running on it.
async fn database(
    backend: Backend,
    dir: &std::path::Path,
) -> Option<(Pool, Settings, Option<TestDatabase>)> {
    let (settings, database) = settings_on(backend, dir).await?;
    let pool = outreach_sync::store::open(&settings).await.expect("open");
    Some((pool, settings, database))
}

/// A stored delivery received `days_ago`, in `state`.
async fn delivery(pool: &Pool, key: &str, body: &str, days_ago: i64, state: &str) {
    let received_at: DateTime<Utc> = Utc::now() - Duration::days(days_ago);
    let done = match pool {
        Pool::Sqlite(pool) => sqlx::query(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index, state)
             VALUES (?, ?, ?, '{}', 0, ?)",
        )
        .bind(key)
        .bind(codec::timestamp(received_at))
        .bind(body.as_bytes())
        .bind(state)
        .execute(pool)
        .await
        .map(drop),
        Pool::Postgres(pool) => sqlx::query(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index, state)
             VALUES ($1, $2, $3, '{}', 0, $4)",
        )
        .bind(key)
        .bind(received_at)
        .bind(body.as_bytes())
        .bind(state)
        .execute(pool)
        .await
        .map(drop),
    };
    done.expect("insert a delivery");
}

async fn kept(pool: &Pool) -> Vec<String> {
    let keys: Vec<(String,)> = rows(pool, "SELECT dedup_key FROM outbox ORDER BY id").await;
    keys.into_iter().map(|(k,)| k).collect()
}

on_both_backends!(
    pruning_removes_old_applied_statuses_and_keeps_evidence_quarantine_backlog_and_ledger
);
async fn pruning_removes_old_applied_statuses_and_keeps_evidence_quarantine_backlog_and_ledger(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, settings, database)) = database(backend, dir.path()).await else {
        return;
    };
    delivery(&pool, "status-old", STATUS, 100, "applied").await;
    delivery(&pool, "consent-old", CONSENT, 100, "applied").await;
    delivery(&pool, "status-quarantined", STATUS, 100, "quarantined").await;
    delivery(&pool, "status-pending", STATUS, 95, "pending").await;
    delivery(&pool, "status-after-pending", STATUS, 95, "applied").await;
    delivery(&pool, "status-recent", STATUS, 10, "applied").await;
    for opted_out in [true, false] {
        let change = LocalChange {
            account: outreach_sync::model::AccountId::default_account(),
            organization_id: "org_1".into(),
            phone_number: "+15550004444".into(),
            opted_out,
            tag_id: None,
            reason: None,
            actor: "cli:test".into(),
        };
        apply::record_local(&pool, &change, Utc::now())
            .await
            .unwrap();
    }
    let all = kept(&pool).await;
    let pruner = Pruner::new(&pool, &settings.retention);

    let dry = pruner.prune(Utc::now(), true).await.unwrap();
    assert_eq!(
        (
            dry.message_status_deliveries,
            dry.consent_deliveries,
            dry.quarantined_kept
        ),
        (1, 0, 1)
    );
    assert_eq!(kept(&pool).await, all, "a dry run removes nothing");

    let pruned: Pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(
        (pruned.message_status_deliveries, pruned.consent_deliveries),
        (1, 0)
    );
    assert_eq!(
        kept(&pool).await,
        [
            "consent-old",
            "status-quarantined",
            "status-pending",
            "status-after-pending",
            "status-recent"
        ]
    );

    // Once the backlog is applied, the rest of what is old enough goes.
    let applied = "UPDATE outbox SET state = 'applied' WHERE dedup_key = 'status-pending'";
    match &pool {
        Pool::Sqlite(p) => sqlx::query(applied).execute(p).await.map(drop),
        Pool::Postgres(p) => sqlx::query(applied).execute(p).await.map(drop),
    }
    .unwrap();
    let pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(pruned.message_status_deliveries, 2);
    assert_eq!(
        kept(&pool).await,
        ["consent-old", "status-quarantined", "status-recent"]
    );

    // Five years on: the consent delivery goes too; the quarantined one and the ledger stay.
    let later = Utc::now() + Duration::days(1831);
    let pruned = pruner.prune(later, false).await.unwrap();
    assert_eq!(
        (pruned.message_status_deliveries, pruned.consent_deliveries),
        (1, 1)
    );
    assert_eq!(kept(&pool).await, ["status-quarantined"]);
    let entries: Vec<(i64,)> = rows(&pool, "SELECT COUNT(*) FROM ledger").await;
    assert_eq!(entries[0].0, 2);
    assert!(
        outreach_sync::ledger::chain::verify(&pool)
            .await
            .unwrap()
            .is_ok()
    );

    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

/// A `messageStatus-v1` delivery of `message` in `status`, its event `days_ago`.
fn status_of(message: &str, status: &str, days_ago: i64) -> String {
    let at = (Utc::now() - Duration::days(days_ago)).to_rfc3339();
    serde_json::json!({"type": "messageStatus-v1", "id": format!("evt-{message}-{status}-{days_ago}"),
        "createdAt": at, "data": {"id": message, "threadId": "th_1", "status": status,
        "type": "SMS", "createdAt": at, "organizationId": "org_1"}})
    .to_string()
}

/// Delivers the statuses, as (message, status, days ago), received now, and applies them.
async fn mirror(pool: &Pool, statuses: &[(&str, &str, i64)]) {
    for (message, status, days_ago) in statuses {
        let body = status_of(message, status, *days_ago);
        let key = format!("event:{message}-{status}-{days_ago}");
        delivery(pool, &key, &body, 0, "pending").await;
    }
    Worker::new(pool.clone(), Arc::new(OutboxState::default()), false)
        .drain()
        .await
        .expect("apply");
}

async fn messages(pool: &Pool) -> Vec<(String, String)> {
    rows(pool, "SELECT id, status FROM messages ORDER BY id").await
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

on_both_backends!(old_finished_messages_leave_the_mirror_and_open_or_recent_ones_stay);
async fn old_finished_messages_leave_the_mirror_and_open_or_recent_ones_stay(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, settings, database)) = database(backend, dir.path()).await else {
        return;
    };
    assert_eq!(settings.retention.messages_days, 90);
    mirror(
        &pool,
        &[
            ("msg-old-delivered", "delivered", 100),
            ("msg-old-queued", "queued", 100),
            ("msg-recent-delivered", "delivered", 10),
        ],
    )
    .await;
    let all = owned(&[
        ("msg-old-delivered", "delivered"),
        ("msg-old-queued", "queued"),
        ("msg-recent-delivered", "delivered"),
    ]);
    assert_eq!(messages(&pool).await, all);
    let pruner = Pruner::new(&pool, &settings.retention);

    let dry = pruner.prune(Utc::now(), true).await.unwrap();
    assert_eq!(dry.messages, 1);
    assert_eq!(messages(&pool).await, all, "a dry run removes nothing");
    // As a user runs it.
    let url = settings.database.url.clone();
    let env = [
        ("OUTREACH_SYNC__DATABASE__URL", url.as_str()),
        ("OUTREACH_SYNC__WEBHOOK__SECRETS", "s"),
    ];
    let out = crate::cli::run(dir.path(), &["prune", "--dry-run", "--json"], &env, "");
    assert!(out.status.success(), "{}", crate::cli::text(&out.stderr));
    let counts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(counts["messages"], 1, "{counts}");
    let out = crate::cli::run(dir.path(), &["prune", "--dry-run"], &env, "");
    let shown = crate::cli::text(&out.stdout);
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("messages would remove:")
                && l.split_whitespace().nth(3) == Some("1")),
        "{shown}"
    );
    assert_eq!(messages(&pool).await, all, "a dry run removes nothing");

    let pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(pruned.messages, 1);
    let kept = owned(&[
        ("msg-old-queued", "queued"),
        ("msg-recent-delivered", "delivered"),
    ]);
    assert_eq!(messages(&pool).await, kept);
    let again = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(again.messages, 0);

    // Non-terminal: kept however old, for the reconciler to look up.
    let pruned = pruner
        .prune(Utc::now() + Duration::days(3650), false)
        .await
        .unwrap();
    assert_eq!(pruned.messages, 1);
    assert_eq!(
        messages(&pool).await,
        owned(&[("msg-old-queued", "queued")])
    );

    // A late status of a pruned message mirrors it again, as for a new one.
    mirror(&pool, &[("msg-old-delivered", "undelivered", 99)]).await;
    assert_eq!(
        messages(&pool).await,
        owned(&[
            ("msg-old-delivered", "undelivered"),
            ("msg-old-queued", "queued")
        ])
    );

    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

on_both_backends!(a_sent_message_stays_through_the_receipt_window_however_short_the_retention);
async fn a_sent_message_stays_through_the_receipt_window_however_short_the_retention(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, mut settings, database)) = database(backend, dir.path()).await else {
        return;
    };
    settings.retention.messages_days = 1;
    mirror(
        &pool,
        &[("msg-sent", "sent", 2), ("msg-delivered", "delivered", 2)],
    )
    .await;
    let pruner = Pruner::new(&pool, &settings.retention);
    let pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(pruned.messages, 0, "both within the 72-hour receipt window");
    let pruned = pruner
        .prune(Utc::now() + Duration::days(2), false)
        .await
        .unwrap();
    assert_eq!(pruned.messages, 2);
    assert!(messages(&pool).await.is_empty());

    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

#[tokio::test]
async fn a_sqlite_file_from_before_retention_is_switched_to_incremental_vacuum_at_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let settings = test_settings(dir.path());
    let url = format!("{}?mode=rwc", settings.database.url);
    let old = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE before_retention (x)")
        .execute(&old)
        .await
        .unwrap();
    let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
        .fetch_one(&old)
        .await
        .unwrap();
    assert_eq!(mode, 0);
    old.close().await;

    outreach_sync::store::open(&settings)
        .await
        .unwrap()
        .close()
        .await;
    // A connection of its own: the header as the file now has it.
    let reopened = sqlx::SqlitePool::connect(&settings.database.url)
        .await
        .unwrap();
    let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
        .fetch_one(&reopened)
        .await
        .unwrap();
    assert_eq!(mode, 2, "INCREMENTAL");
}

/// A source's record noted `days_ago`.
async fn source_record(pool: &Pool, record: &str, days_ago: i64) {
    let at: DateTime<Utc> = Utc::now() - Duration::days(days_ago);
    let sql = "INSERT INTO source_records (source, record, at) VALUES ('van-main', $1, $2)";
    let done = match pool {
        Pool::Sqlite(pool) => sqlx::query(sql)
            .bind(record)
            .bind(codec::timestamp(at))
            .execute(pool)
            .await
            .map(drop),
        Pool::Postgres(pool) => sqlx::query(sql)
            .bind(record)
            .bind(at)
            .execute(pool)
            .await
            .map(drop),
    };
    done.expect("insert a source's record");
}

on_both_backends!(a_sources_records_go_once_no_read_can_reach_them_again);
/// Each record a source read is kept so that it records nothing twice; past VAN's 90 days
/// no read reaches it again, and it goes (the table would otherwise grow for ever).
async fn a_sources_records_go_once_no_read_can_reach_them_again(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, settings, database)) = database(backend, dir.path()).await else {
        return;
    };
    for n in 0..700 {
        source_record(&pool, &format!("old-{n}"), 101).await;
    }
    source_record(&pool, "recent", 89).await;
    let pruner = Pruner::new(&pool, &settings.retention);
    let pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(pruned.source_records, 700, "in batches, every old one");
    let left: Vec<(String,)> = rows(&pool, "SELECT record FROM source_records").await;
    assert_eq!(left, vec![("recent".to_owned(),)]);

    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

/// A reply kept for review: decided `days_ago` (`None`: waiting), received a day before.
async fn reply(pool: &Pool, record: &str, decided_days_ago: Option<i64>, received_days_ago: i64) {
    let received: DateTime<Utc> = Utc::now() - Duration::days(received_days_ago);
    let decided = decided_days_ago.map(|d| Utc::now() - Duration::days(d));
    let decision = decided.map(|_| "not_opt_out");
    let sql = "INSERT INTO review_replies (source, record, phone_number, body, matched,
                   stands_on, received_at, decision, decided_by, decided_at)
               VALUES ('twilio-main', $1, '+15550100000', 'cancel my order', '[\"cancel\"]',
                   '{}', $2, $3, $4, $5)";
    let by = decided.map(|_| "organizer");
    let done = match pool {
        Pool::Sqlite(pool) => sqlx::query(sql)
            .bind(record)
            .bind(codec::timestamp(received))
            .bind(decision)
            .bind(by)
            .bind(decided.map(codec::timestamp))
            .execute(pool)
            .await
            .map(drop),
        Pool::Postgres(pool) => sqlx::query(sql)
            .bind(record)
            .bind(received)
            .bind(decision)
            .bind(by)
            .bind(decided)
            .execute(pool)
            .await
            .map(drop),
    };
    done.expect("insert a reply");
}

on_both_backends!(a_decided_reply_goes_with_the_consent_evidence_and_one_waiting_never_does);
/// A reply decided is kept as long as consent evidence is (`consent_delivery_days`); one
/// still waiting for a person stays however old it is.
async fn a_decided_reply_goes_with_the_consent_evidence_and_one_waiting_never_does(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, settings, database)) = database(backend, dir.path()).await else {
        return;
    };
    let days = i64::from(settings.retention.consent_delivery_days);
    reply(&pool, "SMold", Some(days + 1), days + 2).await;
    reply(&pool, "SMrecent", Some(days - 1), days + 2).await;
    reply(&pool, "SMwaiting", None, days + 400).await;
    let pruner = Pruner::new(&pool, &settings.retention);
    let pruned = pruner.prune(Utc::now(), false).await.unwrap();
    assert_eq!(pruned.decided_replies, 1);
    let left: Vec<(String,)> =
        rows(&pool, "SELECT record FROM review_replies ORDER BY record").await;
    assert_eq!(
        left,
        vec![("SMrecent".to_owned(),), ("SMwaiting".to_owned(),)]
    );

    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}
