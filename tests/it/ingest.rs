//! The ingest listener over real HTTP, with a real SQLite file behind it.

use crate::common;

use common::{Backend, SECRET, consent_event, on_both_backends, spawn_app, spawn_app_on};
use outreach_sync::settings::{Algorithm, Encoding, Scheme};
use outreach_sync::store::Pool;
use secrecy::SecretString;
use serde_json::Value;
use sqlx::Connection as _;

#[tokio::test]
async fn a_signed_delivery_is_in_the_database_when_it_is_acknowledged() {
    let app = spawn_app(|_| {}).await;
    let body = consent_event("evt_1", "+15550001111", true);

    let response = app.post_signed(&body).await;

    assert_eq!(response.status(), 200);
    let ack: Value = response.json().await.unwrap();
    assert_eq!(ack["status"], "accepted");
    let id = ack["id"].as_i64().unwrap();
    let (stored, key, state, headers): (Vec<u8>, String, String, String) =
        sqlx::query_as("SELECT body, dedup_key, state, headers FROM outbox WHERE id = ?")
            .bind(id)
            .fetch_one(app.sqlite())
            .await
            .unwrap();
    assert_eq!(stored, body.as_bytes(), "the exact received bytes are kept");
    assert_eq!(key, "event:evt_1");
    // Every header as received, in order, as [name, value] pairs.
    let headers: Vec<(String, String)> = serde_json::from_str(&headers).unwrap();
    assert!(
        headers.iter().any(|(name, _)| name == "x-signature"),
        "{headers:?}"
    );
    // Nothing was waiting before it, so it was applied in the same commit: the opt-out is
    // in the ledger and the current state by the time the sender hears 200.
    assert_eq!(state, "applied");
    let (opted_out, seq): (bool, i64) = sqlx::query_as(
        "SELECT s.opted_out, s.seq FROM consent_state AS s JOIN ledger AS l ON l.seq = s.seq
         WHERE s.phone_number = '+15550001111' AND l.event_ref = 'event:evt_1'",
    )
    .fetch_one(app.sqlite())
    .await
    .unwrap();
    assert!(opted_out);
    assert!(seq > 0);
    app.stop().await;
}

/// Makes every apply fail (as a broken mirror would) until [`mend_the_ledger`].
async fn break_the_ledger(app: &common::TestApp) {
    refuse_ledger_entries(app, "TRUE", "broken").await;
}

/// A trigger `broken` that fails every ledger insert for which `condition` (on `NEW`)
/// holds, with `message`.
async fn refuse_ledger_entries(app: &common::TestApp, condition: &str, message: &str) {
    app.execute(&match app.pool {
        Pool::Sqlite(_) => format!(
            "CREATE TRIGGER broken BEFORE INSERT ON ledger WHEN {condition}
             BEGIN SELECT RAISE(ABORT, '{message}'); END"
        ),
        Pool::Postgres(_) => format!(
            "CREATE FUNCTION broken() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF {condition} THEN RAISE EXCEPTION '{message}'; END IF;
                 RETURN NEW;
             END $$;
             CREATE TRIGGER broken BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION broken()"
        ),
    })
    .await;
}

async fn mend_the_ledger(app: &common::TestApp) {
    app.execute(match app.pool {
        Pool::Sqlite(_) => "DROP TRIGGER broken",
        Pool::Postgres(_) => "DROP TRIGGER broken ON ledger",
    })
    .await;
}

async fn states(app: &common::TestApp) -> Vec<String> {
    app.texts("SELECT state FROM outbox ORDER BY id").await
}

on_both_backends!(a_delivery_that_cannot_be_applied_is_still_acknowledged_and_applied_later);
async fn a_delivery_that_cannot_be_applied_is_still_acknowledged_and_applied_later(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    break_the_ledger(&app).await;

    let response = app
        .post_signed(&consent_event("evt_later", "+15550002222", true))
        .await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap()["status"],
        "accepted"
    );
    assert_eq!(
        states(&app).await,
        ["pending"],
        "committed, left to the worker"
    );
    mend_the_ledger(&app).await;
    app.drain().await;
    assert_eq!(states(&app).await, ["applied"], "the worker applies it now");
    let entries = app
        .count("SELECT COUNT(*) FROM ledger WHERE event_ref = 'event:evt_later'")
        .await;
    assert_eq!(entries, 1);
    app.stop().await;
}

on_both_backends!(the_same_delivery_twice_is_one_row_and_answers_duplicate);
async fn the_same_delivery_twice_is_one_row_and_answers_duplicate(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = consent_event("evt_dup", "+15550001111", true);

    let first: Value = app.post_signed(&body).await.json().await.unwrap();
    let second = app.post_signed(&body).await;

    assert_eq!(second.status(), 200);
    let second: Value = second.json().await.unwrap();
    assert_eq!(second["status"], "duplicate");
    assert_eq!(second["id"], first["id"]);
    assert_eq!(app.outbox_rows().await, 1);
    app.stop().await;
}

on_both_backends!(a_delivery_without_an_id_is_deduplicated_on_its_bytes);
async fn a_delivery_without_an_id_is_deduplicated_on_its_bytes(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = r#"{"type":"messageStatus-v1","data":{"id":"m1","status":"sent"}}"#;

    let first: Value = app.post_signed(body).await.json().await.unwrap();
    let again: Value = app.post_signed(body).await.json().await.unwrap();
    let other: Value = app
        .post_signed(&body.replace("sent", "delivered"))
        .await
        .json()
        .await
        .unwrap();

    assert_eq!(
        (first["status"].as_str(), again["status"].as_str()),
        (Some("accepted"), Some("duplicate"))
    );
    assert_eq!(other["status"], "accepted");
    assert_eq!(app.outbox_rows().await, 2);
    app.stop().await;
}

on_both_backends!(concurrent_deliveries_each_get_their_own_durable_row);
async fn concurrent_deliveries_each_get_their_own_durable_row(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let mut tasks = Vec::new();
    for i in 0..200 {
        let body = consent_event(&format!("evt_{i}"), "+15550001111", i % 2 == 0);
        let headers = app.sign_with(SECRET, body.as_bytes());
        let request = app.http.post(app.url("/webhooks")).body(body);
        let request = headers.iter().fold(request, |r, (n, v)| r.header(n, v));
        tasks.push(tokio::spawn(request.send()));
    }
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let response = task.await.unwrap().unwrap();
        assert_eq!(response.status(), 200);
        let ack: Value = response.json().await.unwrap();
        ids.insert(ack["id"].as_i64().unwrap());
    }
    assert_eq!(ids.len(), 200);
    assert_eq!(app.outbox_rows().await, 200);
    app.stop().await;
}

on_both_backends!(a_missing_or_wrong_signature_is_refused_and_nothing_is_stored);
async fn a_missing_or_wrong_signature_is_refused_and_nothing_is_stored(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = consent_event("evt_2", "+15550001111", true);
    let signed = app.sign_with(SECRET, body.as_bytes());
    let wrong_secret = app.sign_with("not-the-secret", body.as_bytes());
    let truncated = vec![("x-signature".to_string(), signed[0].1[..32].to_string())];

    for headers in [vec![], wrong_secret, truncated] {
        let response = app.post_with(body.clone(), &headers).await;
        assert_eq!(response.status(), 401, "{headers:?}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["code"], 401);
        assert!(error["message"].is_string());
    }
    let tampered = app.post_with(body.replace("true", "false"), &signed).await;
    assert_eq!(tampered.status(), 401);
    assert_eq!(app.outbox_rows().await, 0);
    app.stop().await;
}

on_both_backends!(an_error_never_shows_the_secret_or_the_expected_signature);
async fn an_error_never_shows_the_secret_or_the_expected_signature(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = consent_event("evt_3", "+15550001111", true);
    let expected = app.sign_with(SECRET, body.as_bytes())[0].1.clone();

    let response = app
        .post_with(body, &[("x-signature".into(), "00".repeat(32))])
        .await;
    assert_eq!(response.status(), 401);
    let text = response.text().await.unwrap();

    // The sender learns what is wrong, and nothing that would help forge a signature.
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        error,
        serde_json::json!({"code": 401, "message": "signature does not match"})
    );
    assert!(
        !text.contains(SECRET) && !text.contains(&expected),
        "{text}"
    );
    app.stop().await;
}

on_both_backends!(a_signed_timestamp_outside_the_tolerance_is_refused);
async fn a_signed_timestamp_outside_the_tolerance_is_refused(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| {
        s.webhook.timestamp_header = "X-Timestamp".into();
        s.webhook.tolerance_secs = 60;
    })
    .await
    else {
        return;
    };
    let body = consent_event("evt_4", "+15550001111", true);
    let key = outreach_sync::signature::Key::for_scheme(Scheme::Hmac, SECRET).unwrap();
    let format = outreach_sync::signature::SignatureFormat::from(&app.settings.webhook);
    let now = chrono::Utc::now().timestamp();

    for (at, status) in [(now - 600, 401), (now + 600, 401), (now - 30, 200)] {
        let headers = outreach_sync::signature::sign(&format, &key, body.as_bytes(), at, None);
        assert_eq!(headers.len(), 2, "signature and timestamp");
        let response = app.post_with(body.clone(), &headers).await;
        assert_eq!(response.status(), status, "signed at now{:+}", at - now);
    }
    assert_eq!(app.outbox_rows().await, 1);
    app.stop().await;
}

on_both_backends!(standard_webhooks_deliveries_are_verified_and_deduplicated_on_the_webhook_id);
async fn standard_webhooks_deliveries_are_verified_and_deduplicated_on_the_webhook_id(
    backend: Backend,
) {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let Some(app) = spawn_app_on(backend, |s| {
        s.webhook.scheme = Scheme::StandardWebhooks;
        s.webhook.secrets = vec![SecretString::from(secret)];
    })
    .await
    else {
        return;
    };
    let body = r#"{"type":"consentUpdate-v1","data":{"id":"lead_1","globalOptedOut":true}}"#;
    let headers = app.sign_with(secret, body.as_bytes());

    let first: Value = app.post_with(body, &headers).await.json().await.unwrap();
    let again: Value = app.post_with(body, &headers).await.json().await.unwrap();
    let mut bad = headers.clone();
    bad[2].1 = "v1,".into();
    let refused = app.post_with(body, &bad).await;

    assert_eq!(first["status"], "accepted");
    assert_eq!(again["status"], "duplicate");
    assert_eq!(refused.status(), 401);
    assert_eq!(
        app.texts("SELECT dedup_key FROM outbox").await,
        [format!("webhook:{}", headers[0].1)]
    );
    app.stop().await;
}

on_both_backends!(during_a_rotation_both_secrets_verify_and_the_row_records_which);
async fn during_a_rotation_both_secrets_verify_and_the_row_records_which(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| {
        s.webhook.secrets = vec![
            SecretString::from("old-secret"),
            SecretString::from("new-secret"),
        ];
    })
    .await
    else {
        return;
    };
    for (i, secret) in ["old-secret", "new-secret"].iter().enumerate() {
        let body = consent_event(&format!("evt_rot_{i}"), "+15550001111", true);
        let headers = app.sign_with(secret, body.as_bytes());
        let ack: Value = app.post_with(body, &headers).await.json().await.unwrap();
        let index = app
            .count(&format!(
                "SELECT CAST(secret_index AS BIGINT) FROM outbox WHERE id = {}",
                ack["id"]
            ))
            .await;
        assert_eq!(index, i as i64, "{secret}");
    }
    app.stop().await;
}

on_both_backends!(other_hmac_formats_are_honoured_when_configured);
async fn other_hmac_formats_are_honoured_when_configured(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| {
        s.webhook.header = "X-Hub-Signature-512".into();
        s.webhook.algorithm = Algorithm::Sha512;
        s.webhook.encoding = Encoding::Base64;
        s.webhook.prefix = "sha512=".into();
    })
    .await
    else {
        return;
    };
    let body = consent_event("evt_fmt", "+15550001111", true);
    let headers = app.sign_with(SECRET, body.as_bytes());
    assert!(headers[0].1.starts_with("sha512="));

    assert_eq!(app.post_with(body.clone(), &headers).await.status(), 200);
    let unprefixed = vec![(
        headers[0].0.clone(),
        headers[0].1["sha512=".len()..].to_string(),
    )];
    assert_eq!(app.post_with(body, &unprefixed).await.status(), 401);
    app.stop().await;
}

on_both_backends!(a_verified_body_that_is_not_json_gets_400_and_is_not_stored);
async fn a_verified_body_that_is_not_json_gets_400_and_is_not_stored(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = "type=consentUpdate-v1";
    let response = app.post_signed(body).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["code"], 400);
    assert_eq!(app.outbox_rows().await, 0);
    app.stop().await;
}

on_both_backends!(a_body_over_the_limit_gets_413_whether_announced_or_streamed);
async fn a_body_over_the_limit_gets_413_whether_announced_or_streamed(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| s.ingest.max_body_bytes = 1024).await else {
        return;
    };
    let big = format!(r#"{{"id":"big","pad":"{}"}}"#, "x".repeat(4096));
    let headers = app.sign_with(SECRET, big.as_bytes());

    let announced = app.post_with(big.clone(), &headers).await;
    assert_eq!(announced.status(), 413);
    // Answered before the body was read: the connection is closed, and the answer says so.
    assert_eq!(
        announced.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );
    assert_eq!(announced.json::<Value>().await.unwrap()["code"], 413);

    // Without a Content-Length the limit is enforced while reading.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.as_bytes().chunks(512).map(|c| Ok(c.to_vec())).collect();
    let streamed = app
        .http
        .post(app.url("/webhooks"))
        .header(&headers[0].0, &headers[0].1)
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 413);
    assert_eq!(app.outbox_rows().await, 0);
    app.stop().await;
}

on_both_backends!(a_full_backlog_answers_503_with_retry_after);
async fn a_full_backlog_answers_503_with_retry_after(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| s.ingest.max_backlog = 2).await else {
        return;
    };
    // Deliveries pile up only when they cannot be applied as they come.
    break_the_ledger(&app).await;
    for i in 0..2 {
        let ok = app
            .post_signed(&consent_event(&format!("evt_b{i}"), "+15550001111", true))
            .await;
        assert_eq!(ok.status(), 200);
    }
    let refused = app
        .post_signed(&consent_event("evt_b2", "+15550001111", true))
        .await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(refused.json::<Value>().await.unwrap()["code"], 503);
    assert_eq!(app.outbox_rows().await, 2);
    app.stop().await;
}

#[tokio::test]
async fn a_database_that_cannot_commit_answers_503_and_recovers_by_itself() {
    let app = spawn_app(|_| {}).await;
    // Another process holds the write lock longer than the busy timeout.
    let mut blocker = sqlx::SqliteConnection::connect(&app.settings.database.url)
        .await
        .unwrap();
    sqlx::query("BEGIN EXCLUSIVE")
        .execute(&mut blocker)
        .await
        .unwrap();

    let refused = app
        .post_signed(&consent_event("evt_locked", "+15550001111", true))
        .await;
    assert_eq!(refused.status(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let ready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);

    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    let accepted = app
        .post_signed(&consent_event("evt_locked", "+15550001111", true))
        .await;
    assert_eq!(accepted.status(), 200);
    assert_eq!(app.outbox_rows().await, 1);
    app.stop().await;
}

on_both_backends!(every_response_carries_the_confirmation_header_when_configured);
async fn every_response_carries_the_confirmation_header_when_configured(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |s| {
        s.webhook.confirmation_header = "X-Vendor-Account".into();
        s.webhook.account_id = "acct_42".into();
    })
    .await
    else {
        return;
    };
    let body = consent_event("evt_c", "+15550001111", true);
    let responses = vec![
        app.post_signed(&body).await,
        app.post_with(body.clone(), &[]).await,
        app.http.get(app.url("/healthz")).send().await.unwrap(),
        app.http.get(app.url("/nowhere")).send().await.unwrap(),
    ];
    for response in responses {
        assert_eq!(
            response
                .headers()
                .get("x-vendor-account")
                .map(|v| v.to_str().unwrap()),
            Some("acct_42"),
            "status {}",
            response.status()
        );
    }
    app.stop().await;
}

on_both_backends!(health_and_readiness_answer_when_the_database_is_writable);
async fn health_and_readiness_answer_when_the_database_is_writable(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let health = app.http.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = app.http.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(
        (ready["migrations"].as_bool(), ready["writable"].as_bool()),
        (Some(true), Some(true))
    );
    app.stop().await;
}

on_both_backends!(only_a_sample_of_the_last_refused_deliveries_is_kept);
async fn only_a_sample_of_the_last_refused_deliveries_is_kept(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    for i in 0..130 {
        let body = consent_event(&format!("evt_r{i}"), "+15550001111", true);
        let response = app
            .post_with(body, &[("x-signature".into(), "00".repeat(32))])
            .await;
        assert_eq!(response.status(), 401);
    }
    // The first refusal is written at once, in order with everything else the writer does:
    // a readiness probe behind it returns once it is committed.
    assert_eq!(app.readyz().await, 200);
    let bodies = async |app: &crate::common::TestApp| -> Vec<String> {
        app.blobs("SELECT body FROM rejected_deliveries ORDER BY id")
            .await
            .iter()
            .map(|body| String::from_utf8_lossy(body).into_owned())
            .collect()
    };
    let first = bodies(&app).await;
    assert_eq!(first.len(), 1);
    assert!(first[0].contains("\"evt_r0\""), "{first:?}");
    // The rest of the period's refusals are a sample of the last ones, kept at its end or
    // at a clean stop.
    let app = app.restart().await;
    let kept = bodies(&app).await;
    let kept_most = outreach_sync::rejections::KEPT;
    assert_eq!(kept.len(), kept_most);
    for (i, body) in (130 - kept_most..130).zip(&kept) {
        assert!(body.contains(&format!("\"evt_r{i}\"")), "{i}: {body}");
    }
    app.stop().await;
}

on_both_backends!(the_same_delivery_sent_concurrently_is_accepted_once);
async fn the_same_delivery_sent_concurrently_is_accepted_once(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = consent_event("evt_race", "+15550001111", true);
    let headers = app.sign_with(SECRET, body.as_bytes());
    let sends = (0..20).map(|_| {
        let request = app.http.post(app.url("/webhooks")).body(body.clone());
        let request = headers.iter().fold(request, |r, (n, v)| r.header(n, v));
        tokio::spawn(request.send())
    });
    let mut statuses = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for send in sends.collect::<Vec<_>>() {
        let ack: Value = send.await.unwrap().unwrap().json().await.unwrap();
        statuses.push(ack["status"].as_str().unwrap().to_owned());
        ids.insert(ack["id"].as_i64().unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| *s == "accepted").count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| *s == "duplicate").count(), 19);
    assert_eq!(ids.len(), 1);
    assert_eq!(app.outbox_rows().await, 1);
    app.stop().await;
}

on_both_backends!(a_burst_mixing_stored_and_new_deliveries_answers_each_with_its_own_row);
async fn a_burst_mixing_stored_and_new_deliveries_answers_each_with_its_own_row(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let event =
        |i: usize| consent_event(&format!("evt_mix_{i}"), "+15550001111", i.is_multiple_of(3));
    let mut stored = std::collections::HashMap::new();
    for i in (0..100).step_by(2) {
        let ack: Value = app.post_signed(&event(i)).await.json().await.unwrap();
        stored.insert(i, ack["id"].as_i64().unwrap());
    }

    // Stored and new interleaved, all at once, so that batches hold both.
    let sends: Vec<_> = (0..100)
        .map(|i| {
            let body = event(i);
            let headers = app.sign_with(SECRET, body.as_bytes());
            let request = app.http.post(app.url("/webhooks")).body(body);
            let request = headers.iter().fold(request, |r, (n, v)| r.header(n, v));
            (i, tokio::spawn(request.send()))
        })
        .collect();
    for (i, send) in sends {
        let ack: Value = send.await.unwrap().unwrap().json().await.unwrap();
        let id = ack["id"].as_i64().unwrap();
        match stored.get(&i) {
            Some(first) => {
                assert_eq!(ack["status"], "duplicate", "event {i}");
                assert_eq!(id, *first, "event {i} answers its first row");
            }
            None => assert_eq!(ack["status"], "accepted", "event {i}"),
        }
        assert_eq!(
            app.texts(&format!("SELECT dedup_key FROM outbox WHERE id = {id}"))
                .await,
            [format!("event:evt_mix_{i}")],
            "the id answered is the event's row"
        );
    }
    assert_eq!(app.outbox_rows().await, 100);
    app.stop().await;
}

on_both_backends!(a_verified_delivery_of_an_unknown_event_is_kept_and_quarantined_with_its_reason);
async fn a_verified_delivery_of_an_unknown_event_is_kept_and_quarantined_with_its_reason(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = r#"{"type":"leadDeleted-v9","id":"evt_unknown","data":{}}"#;

    let response = app.post_signed(body).await;

    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap()["status"],
        "accepted"
    );
    // SQLite applied it in the commit that stored it; PostgreSQL's workers apply behind.
    app.drain().await;
    assert_eq!(app.texts("SELECT state FROM outbox").await, ["quarantined"]);
    let error = app.texts("SELECT last_error FROM outbox").await;
    assert!(error[0].contains("leadDeleted-v9"), "{error:?}");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE applied_at IS NULL")
            .await,
        1
    );
    assert_eq!(
        app.blobs("SELECT body FROM outbox").await,
        [body.as_bytes()],
        "kept as received, for a replay after an upgrade"
    );
    app.stop().await;
}

on_both_backends!(
    a_delivery_that_keeps_failing_is_quarantined_after_five_attempts_and_holds_up_no_other
);
async fn a_delivery_that_keeps_failing_is_quarantined_after_five_attempts_and_holds_up_no_other(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    // The mirror refuses one number only, as a bug triggered by one event would.
    refuse_ledger_entries(
        &app,
        "NEW.phone_number = '+15550009999'",
        "this number breaks the mirror",
    )
    .await;
    let bad = consent_event("evt_bad", "+15550009999", true);
    let good = consent_event("evt_good", "+15550001111", true);
    for body in [&bad, &good] {
        assert_eq!(app.post_signed(body).await.status(), 200);
    }

    // The daemon's own worker retries the failing row alone, with growing pauses
    // (0.1 s doubling), and quarantines it at its fifth failure.
    // Its schedule is the test's subject: watched, not hurried with a drain.
    let quarantined = crate::common::within(std::time::Duration::from_secs(20), async || {
        app.count("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
            .await
            == 0
    })
    .await;
    assert!(
        quarantined.is_some(),
        "still pending: {:?}",
        states(&app).await
    );
    assert_eq!(states(&app).await, ["quarantined", "applied"]);
    let attempts = |key: &str| {
        format!("SELECT CAST(attempts AS BIGINT) FROM outbox WHERE dedup_key = '{key}'")
    };
    assert_eq!(app.count(&attempts("event:evt_bad")).await, 5);
    assert_eq!(
        app.count(&attempts("event:evt_good")).await,
        0,
        "no failure counted against the row that applies"
    );
    let error = app
        .texts("SELECT last_error FROM outbox WHERE dedup_key = 'event:evt_bad'")
        .await;
    assert!(
        error[0].contains("this number breaks the mirror"),
        "{error:?}"
    );
    app.stop().await;
}
