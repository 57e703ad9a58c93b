//! The evidence bundle, read as an auditor would: the delivery's signature checked again
//! with the secret, each entry's hash recomputed from the bundle alone (no code of the
//! daemon), the actor of a local change, the lead of a reconciled one; and the CLI as a new
//! user runs it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{Duration, Utc};
use hmac::Mac as _;
use outreach_sync::apply;
use outreach_sync::model::Lead;
use outreach_sync::retention::Pruner;
use outreach_sync::store::Pool;
use outreach_sync::store::codec;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use sqlx::Connection as _;

use crate::cli::{run, text};
use crate::common::{
    self, ADMIN_TOKEN, Backend, SECRET, TestApp, consent_event, on_both_backends, spawn_app_on,
};

/// The hash of a bundle item, computed as docs/evidence-and-retention.md tells an auditor to.
fn recomputed_hash(item: &Value) -> String {
    let canonical = Value::Array(
        [
            "prevHash",
            "seq",
            "organizationId",
            "leadId",
            "phoneNumber",
            "optedOut",
            "occurredAt",
            "recordedAt",
            "source",
            "eventRef",
            "superseded",
            "tagId",
            "reason",
        ]
        .iter()
        .map(|field| item[*field].clone())
        .collect(),
    );
    hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
}

/// Every item's hash follows from its fields and the hash before it; consecutive items
/// link up.
fn assert_chain_holds(bundle: &Value) {
    let items = bundle["items"].as_array().expect("items");
    for item in items {
        assert_eq!(item["hash"], recomputed_hash(item).as_str(), "{item:#}");
    }
    for pair in items.windows(2) {
        if pair[1]["seq"].as_i64() == pair[0]["seq"].as_i64().map(|s| s + 1) {
            assert_eq!(pair[1]["prevHash"], pair[0]["hash"]);
        }
    }
    let last = items.last().expect("an item");
    assert!(bundle["chainHead"]["seq"].as_i64() >= last["seq"].as_i64());
}

/// The configured scheme (hmac, sha256, hex, header `X-Signature`) recomputed over the
/// bundled bytes with the secret.
fn signature_checks_out(evidence: &Value, secret: &str) -> bool {
    let body = STANDARD
        .decode(evidence["bodyBase64"].as_str().expect("bodyBase64"))
        .expect("base64");
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(&body);
    let expected = hex::encode(mac.finalize().into_bytes());
    evidence["headers"]["x-signature"] == expected.as_str()
}

async fn evidence_of(app: &TestApp, phone: &str) -> Value {
    let response = app
        .admin_get(&format!(
            "/v1/consent/evidence?phoneNumber={}",
            phone.replace('+', "%2B")
        ))
        .await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

/// Named admin tokens: `crm` and one without a name.
fn with_named_tokens(settings: &mut outreach_sync::settings::Settings) {
    settings.admin.tokens = vec![
        SecretString::from(ADMIN_TOKEN),
        SecretString::from("crm:crm-token-0123"),
    ];
}

on_both_backends!(
    a_webhook_opt_out_comes_with_its_delivery_whose_signature_checks_out_with_the_secret
);
async fn a_webhook_opt_out_comes_with_its_delivery_whose_signature_checks_out_with_the_secret(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_named_tokens).await else {
        return;
    };
    let phone = "+15550001111";
    assert_eq!(
        app.post_signed(&consent_event("evt_stop", phone, true))
            .await
            .status(),
        200
    );
    app.drain().await;

    let bundle = evidence_of(&app, phone).await;
    assert_eq!(bundle["phoneNumber"], phone);
    let item = &bundle["items"][0];
    assert_eq!(
        (item["source"].as_str(), item["optedOut"].as_bool()),
        (Some("webhook"), Some(true))
    );
    let evidence = &item["evidence"];
    assert_eq!(evidence["secretIndex"], 0);
    assert!(evidence["receivedAt"].is_string());
    assert!(signature_checks_out(evidence, SECRET), "{evidence:#}");
    assert!(!signature_checks_out(evidence, "another-secret"));
    assert_chain_holds(&bundle);

    // Five years on, the delivery is pruned: the entry and its hash stay, and the bundle
    // says where the delivery went.
    let settings = app.settings.retention.clone();
    let later = Utc::now() + Duration::days(i64::from(settings.consent_delivery_days) + 1);
    let pruned = Pruner::new(&app.pool, &settings)
        .prune(later, false)
        .await
        .unwrap();
    assert_eq!(pruned.consent_deliveries, 1);
    let bundle = evidence_of(&app, phone).await;
    let evidence = &bundle["items"][0]["evidence"];
    assert_eq!(evidence["kept"], false);
    assert!(
        evidence["note"].as_str().unwrap().contains("pruned"),
        "{evidence:#}"
    );
    assert_chain_holds(&bundle);
    assert!(
        outreach_sync::ledger::chain::verify(&app.pool)
            .await
            .unwrap()
            .is_ok()
    );
    app.stop().await;
}

on_both_backends!(
    a_repeated_signature_header_is_kept_in_order_and_the_evidence_names_the_value_that_verified
);
/// As found: with the signature header twice, the evidence kept the last value while
/// verification used the first, so checking a delivery again from its evidence could fail.
/// Every value is tried now, every header is kept as received, in order, and the evidence
/// names the value that verified, whichever it is.
async fn a_repeated_signature_header_is_kept_in_order_and_the_evidence_names_the_value_that_verified(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_named_tokens).await else {
        return;
    };
    let bogus = "00".repeat(32);
    for (id, phone, valid_first) in [
        ("evt_valid_first", "+15550003331", true),
        ("evt_valid_second", "+15550003332", false),
    ] {
        let body = consent_event(id, phone, true);
        let (name, valid) = app.sign_with(SECRET, body.as_bytes()).remove(0);
        let (valid_header, bogus_header) = ((name.clone(), valid.clone()), (name, bogus.clone()));
        let trace = ("x-trace".to_owned(), "t1".to_owned());
        let headers = if valid_first {
            vec![valid_header, trace, bogus_header]
        } else {
            vec![bogus_header, trace, valid_header]
        };
        assert_eq!(app.post_with(body, &headers).await.status(), 200, "{id}");
        app.drain().await;

        let evidence = &evidence_of(&app, phone).await["items"][0]["evidence"];
        let received: Vec<(String, String)> =
            serde_json::from_value(evidence["headersReceived"].clone()).expect("pairs");
        let signatures: Vec<&str> = received
            .iter()
            .filter(|(name, _)| name == "x-signature")
            .map(|(_, value)| value.as_str())
            .collect();
        let expected = if valid_first {
            [valid.as_str(), bogus.as_str()]
        } else {
            [bogus.as_str(), valid.as_str()]
        };
        assert_eq!(signatures, expected, "{id}: every value, in order");
        assert!(received.contains(&("x-trace".into(), "t1".into())), "{id}");
        let verified = &evidence["verifiedHeader"];
        assert_eq!(
            (verified["name"].as_str(), verified["value"].as_str()),
            (Some("x-signature"), Some(valid.as_str())),
            "{id}"
        );
        let index = usize::try_from(verified["index"].as_u64().expect("index")).unwrap();
        assert_eq!(received[index], ("x-signature".to_owned(), valid.clone()));
        assert!(signature_checks_out(evidence, SECRET), "{id}: {evidence:#}");
    }

    // A delivery stored before every header was kept holds an object: given as it is.
    let (_, valid) = app
        .sign_with(
            SECRET,
            consent_event("evt_valid_first", "+15550003331", true).as_bytes(),
        )
        .remove(0);
    app.execute(&format!(
        r#"UPDATE outbox SET headers = '{{"content-type":"application/json","x-signature":"{valid}"}}',
               verified_header = NULL
           WHERE dedup_key = 'event:evt_valid_first'"#
    ))
    .await;
    let evidence = &evidence_of(&app, "+15550003331").await["items"][0]["evidence"];
    assert_eq!(evidence["headersReceived"], Value::Null);
    assert_eq!(evidence["verifiedHeader"], Value::Null);
    assert_eq!(evidence["headers"]["content-type"], "application/json");
    assert!(signature_checks_out(evidence, SECRET), "{evidence:#}");
    app.stop().await;
}

on_both_backends!(a_local_change_names_its_actor_and_a_reconciled_one_keeps_the_lead_as_fetched);
async fn a_local_change_names_its_actor_and_a_reconciled_one_keeps_the_lead_as_fetched(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_named_tokens).await else {
        return;
    };
    let phone = "+15550002222";
    let change = json!({"phoneNumber": phone, "organizationId": "org_1", "optedOut": true,
                        "reason": "asked by email"});
    for token in ["crm-token-0123", ADMIN_TOKEN] {
        let response = app
            .http
            .post(app.admin_url("/v1/consent"))
            .bearer_auth(token)
            .json(&change)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
    }
    let lead: Lead = serde_json::from_value(json!({
        "id": "lead_7", "phoneNumber": phone, "organizationId": "org_2",
        "globalOptedOut": true, "firstName": "Ada", "tagIds": ["t1"]
    }))
    .unwrap();
    let fetched_at = Utc::now();
    apply_lead_page(&app.pool, &lead, fetched_at).await;

    let bundle = evidence_of(&app, phone).await;
    let items = bundle["items"].as_array().unwrap();
    let actors: Vec<&Value> = items[..2].iter().map(|i| &i["evidence"]["actor"]).collect();
    assert_eq!(actors, [&json!("crm"), &json!("token-1")]);
    assert_eq!(items[0]["evidence"]["reason"], "asked by email");
    assert_eq!(items[0]["evidence"]["push"], "superseded");
    let reconciled = &items[2];
    assert_eq!(reconciled["source"], "reconcile");
    assert_eq!(
        reconciled["evidence"]["requestedAt"],
        codec::timestamp(fetched_at).as_str()
    );
    assert_eq!(reconciled["evidence"]["lead"]["firstName"], "Ada");
    assert_eq!(reconciled["evidence"]["lead"]["id"], "lead_7");
    assert_chain_holds(&bundle);
    // Scoped to one organization, and a number the ledger never saw.
    let org_2 = app
        .admin_get("/v1/consent/evidence?phoneNumber=%2B15550002222&organizationId=org_2")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(org_2["items"].as_array().unwrap().len(), 1);
    let unknown = app
        .admin_get("/v1/consent/evidence?phoneNumber=%2B15559999999")
        .await;
    assert_eq!(unknown.status(), 404);
    app.stop().await;
}

/// One reconciliation page with `lead`, as the reconciler applies it.
async fn apply_lead_page(pool: &Pool, lead: &Lead, fetched_at: chrono::DateTime<Utc>) {
    let leads = std::slice::from_ref(lead);
    match pool {
        Pool::Sqlite(pool) => {
            let mut conn = pool.acquire().await.unwrap();
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.unwrap();
            apply::lead_page(
                &mut *tx,
                &outreach_sync::model::AccountId::default_account(),
                "pass_1",
                leads,
                fetched_at,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
        Pool::Postgres(pool) => {
            let mut tx = pool.begin().await.unwrap();
            apply::lead_page(
                &mut *tx,
                &outreach_sync::model::AccountId::default_account(),
                "pass_1",
                leads,
                fetched_at,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
    }
}

// Multi-threaded: the commands run as blocking child processes while the daemon works.
on_both_backends!(
    a_new_user_checks_a_bundle_and_the_chain_from_the_command_line,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_new_user_checks_a_bundle_and_the_chain_from_the_command_line(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let phone = "+15550003333";
    assert_eq!(
        app.post_signed(&consent_event("evt_cli", phone, true))
            .await
            .status(),
        200
    );
    app.drain().await;
    let env = [
        ("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET),
        (
            "OUTREACH_SYNC__DATABASE__URL",
            app.settings.database.url.as_str(),
        ),
    ];
    let file = app.dir.path().join("b.json");
    let out = run(
        app.dir.path(),
        &["evidence", phone, "--output", file.to_str().unwrap()],
        &env,
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let bundle: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(signature_checks_out(
        &bundle["items"][0]["evidence"],
        SECRET
    ));
    assert_chain_holds(&bundle);

    let verified = run(app.dir.path(), &["ledger", "verify"], &env, "");
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}",
        text(&verified.stderr)
    );
    assert!(
        text(&verified.stdout).contains("seq 1"),
        "{}",
        text(&verified.stdout)
    );

    // The row changed by hand, its trigger set aside: verify fails and names it.
    app.execute(match backend {
        Backend::Sqlite => {
            "DROP TRIGGER ledger_is_append_only_update;
             UPDATE ledger SET occurred_at = '2026-01-01T00:00:00.000Z' WHERE seq = 1;"
        }
        Backend::Postgres => {
            "ALTER TABLE ledger DISABLE TRIGGER ledger_is_append_only_update;
             UPDATE ledger SET occurred_at = '2026-01-01T00:00:00Z' WHERE seq = 1;"
        }
    })
    .await;
    let broken = run(app.dir.path(), &["ledger", "verify"], &env, "");
    assert_eq!(broken.status.code(), Some(1));
    assert!(
        text(&broken.stderr).contains("seq 1"),
        "{}",
        text(&broken.stderr)
    );
    let json = run(app.dir.path(), &["ledger", "verify", "--json"], &env, "");
    assert_eq!(json.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        (
            report["intact"].as_bool(),
            report["brokenAt"]["seq"].as_i64()
        ),
        (Some(false), Some(1))
    );

    let unknown = run(app.dir.path(), &["evidence", "+15559999999"], &env, "");
    assert_eq!(unknown.status.code(), Some(3));
    app.stop().await;
}

#[test]
fn check_config_shows_a_token_name_but_never_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &["check-config"],
        &[
            ("OUTREACH_SYNC__WEBHOOK__SECRETS", "whsecret"),
            ("OUTREACH_SYNC__ADMIN__TOKENS", "crm:hunter2-a,hunter2-b"),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout) + &text(&out.stderr);
    assert!(shown.contains("crm:[redacted]"), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
}
