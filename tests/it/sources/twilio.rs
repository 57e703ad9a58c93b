//! Twilio as a source: a person's reply to a campaign's Twilio number, posted over real HTTP
//! to `/sources/twilio-main` as Twilio's messaging webhook posts it, signed by the sandbox
//! (Twilio's signing written apart from the daemon's verifier). The URL it is signed for is
//! the one given at Twilio (`public_url`), not the address the test reaches the daemon at,
//! as behind a proxy.

use base64::Engine as _;
use outreach_sync::settings::kinds::twilio::TwilioSettings;
use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync::systems::twilio::MAX_FORM_BYTES;
use outreach_sync_sandbox::twilio::{self as sender, Target};
use secrecy::SecretString;
use serde_json::Value;

use super::{WAIT, compliance_item, entries_from, listed, opted_out_at_service};
use crate::common::{Backend, TestApp, eventually, on_both_backends};
use crate::destinations::once::{opted_in_with_van_id, writes_of};
use crate::destinations::{action_network, campaign};

pub(crate) const TOKEN: &str = "twilio-auth-token-1";
pub(super) const PUBLIC_URL: &str = "https://sync.example.org/sources/twilio-main";

fn twilio_source(tokens: &[&str]) -> SourceSettings {
    let mut source = SourceSettings::new(
        "twilio-main",
        SourceSystem::Twilio(TwilioSettings {
            auth_token: tokens.first().map(|t| SecretString::from(*t)),
            public_url: PUBLIC_URL.to_owned(),
            tokens: tokens[1..].iter().map(|t| SecretString::from(*t)).collect(),
            ..TwilioSettings::default()
        }),
        "",
        "",
    );
    source.api_key = None;
    source
}

/// The campaign's daemon writing to Action Network and hearing a Twilio number.
pub(crate) async fn texting(
    backend: Backend,
    tokens: &[&str],
) -> Option<(outreach_sync_sandbox::RunningSandbox, TestApp)> {
    let (sandbox, mut app) = campaign(backend).await?;
    app.settings.destination = vec![action_network(&sandbox)];
    app.settings.source = vec![twilio_source(tokens)];
    Some((sandbox, app.restart().await))
}

/// Posts `params` to the daemon's twilio source, signed with `token` for `signed_for`.
async fn post_signed(
    app: &TestApp,
    token: &str,
    signed_for: &str,
    params: &[(String, String)],
) -> (u16, String) {
    let url = app.url("/sources/twilio-main");
    let target = Target {
        post_to: &url,
        signed_for,
    };
    sender::send(&reqwest::Client::new(), target, token, params)
        .await
        .expect("an answer")
}

/// The status of a post as [`post_signed`] makes it; 413 too when the daemon, refusing a
/// form over what a source takes unread, closed the connection before the client had
/// written it all (the client then sees its write cut off, not the answer).
async fn status_of(
    app: &TestApp,
    token: &str,
    signed_for: &str,
    params: &[(String, String)],
) -> u16 {
    let url = app.url("/sources/twilio-main");
    let target = Target {
        post_to: &url,
        signed_for,
    };
    match sender::send(&reqwest::Client::new(), target, token, params).await {
        Ok((status, _)) => status,
        Err(error) if error.is_request() && form_size(params) > MAX_FORM_BYTES => 413,
        Err(error) => panic!("no answer: {error}"),
    }
}

/// The bytes `params` take form-encoded, at least.
fn form_size(params: &[(String, String)]) -> usize {
    params.iter().map(|(k, v)| k.len() + v.len() + 2).sum()
}

/// The status of `params` posted to source `name` with `header` as it is, if any.
async fn post_as_is(
    app: &TestApp,
    name: &str,
    params: &[(String, String)],
    header: Option<(&str, &str)>,
) -> u16 {
    let request = reqwest::Client::new()
        .post(app.url(&format!("/sources/{name}")))
        .form(params);
    let request = match header {
        Some((name, value)) => request.header(name, value),
        None => request,
    };
    request.send().await.expect("an answer").status().as_u16()
}

/// A reply of `body` from `from`, as Twilio posts it, signed as Twilio signs it.
async fn text(app: &TestApp, sid: &str, from: &str, body: &str) -> (u16, String) {
    text_from(app, sid, from, body).await
}

/// [`text`], for the other tests of replies.
pub(crate) async fn text_from(app: &TestApp, sid: &str, from: &str, body: &str) -> (u16, String) {
    let params = sender::inbound(sid, from, "+15005550006", body);
    post_signed(app, TOKEN, PUBLIC_URL, &params).await
}

on_both_backends!(
    an_opt_out_texted_to_a_twilio_number_reaches_the_service_and_action_network_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_opt_out_texted_to_a_twilio_number_reaches_the_service_and_action_network_once(
    backend: Backend,
) {
    let Some((sandbox, app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    let answer = text(&app, "SMopt0001", &lead.phone_number, "Opt out").await;
    assert_eq!(
        answer,
        (200, outreach_sync::systems::twilio::EMPTY_TWIML.to_owned()),
        "the empty TwiML: the daemon texts nobody"
    );
    // Twilio posts again when an answer is lost: the same sid is one record.
    assert_eq!(
        text(&app, "SMopt0001", &lead.phone_number, "Opt out")
            .await
            .0,
        200
    );
    // Said again later: nothing new.
    assert_eq!(
        text(&app, "SMopt0002", &lead.phone_number, "STOP").await.0,
        200
    );

    let view = eventually("the replies recorded", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == 2).then_some(view)
    })
    .await;
    assert_eq!(
        (view["kind"].as_str(), view["state"].as_str()),
        (Some("twilio"), Some("ok")),
        "{view}"
    );
    assert_eq!(
        (view["optOuts"].as_i64(), view["confirmed"].as_i64()),
        (Some(1), Some(1)),
        "{view}"
    );
    let entries = entries_from(&app, "twilio", &lead.phone_number).await;
    assert!(
        entries.iter().any(|(org, _)| org == "*"),
        "held account-wide: {entries:?}"
    );
    assert!(
        entries.iter().any(|(org, _)| *org == lead.organization_id),
        "{entries:?}"
    );
    let evidence: Value = serde_json::from_str(&entries[0].1).expect("evidence");
    assert_eq!(
        (evidence["actor"].as_str(), evidence["record"].as_str()),
        (Some("twilio-main"), Some("SMopt0001")),
        "{evidence}"
    );
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number).2,
        1,
        "Action Network had the opt-out once"
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'twilio:twilio-main:%' AND state = 'applied'").await,
        2,
        "two messages, each kept once"
    );
    the_evidence_holds_the_post_as_received(&app, &lead.phone_number).await;
    the_report_names_the_source_it_was_texted_to(&app, &lead.phone_number).await;
}

/// The compliance report's item of the opt-out names the source it was texted to and when
/// the daemon had it, and lists the source as posted to, never behind.
async fn the_report_names_the_source_it_was_texted_to(app: &TestApp, phone: &str) {
    let (report, item) = compliance_item(app, |i| {
        i["source"] == "twilio" && i["phoneNumber"] == phone
    })
    .await;
    assert_eq!(item["readBy"], "twilio-main", "{item}");
    assert!(item["seenAt"].as_str().is_some(), "{item}");
    let source = report["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .find(|s| s["name"] == "twilio-main")
        .cloned()
        .unwrap_or_else(|| panic!("the source in the report: {report}"));
    assert_eq!(
        (source["kind"].as_str(), source["behind"].as_bool()),
        (Some("twilio"), Some(false)),
        "{source}"
    );
}

#[tokio::test]
async fn sandbox_twilio_send_posts_a_reply_the_daemon_takes() {
    let Some(app) = crate::common::spawn_app_on(Backend::Sqlite, |s| {
        s.source = vec![twilio_source(&[TOKEN])];
    })
    .await
    else {
        return;
    };
    let url = app.url("/sources/twilio-main");
    // Run beside the daemon, which serves on this test's runtime: never blocking it.
    let send = |token: &str| {
        tokio::process::Command::new(crate::daemon_process::BIN)
            .args([
                "sandbox",
                "twilio-send",
                "--url",
                &url,
                "--public-url",
                PUBLIC_URL,
            ])
            .args([
                "--auth-token",
                token,
                "--from",
                "+15551230009",
                "--body",
                "Stop.",
            ])
            .output()
    };
    let sent = send(TOKEN).await.expect("the command runs");
    let said = String::from_utf8_lossy(&sent.stdout);
    assert!(
        sent.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(said.starts_with("SM") && said.contains(": 200 "), "{said}");
    eventually("the opt-out recorded", WAIT, async || {
        !entries_from(&app, "twilio", "+15551230009")
            .await
            .is_empty()
    })
    .await;
    let refused = send("another-token").await.expect("the command runs");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("403"),
        "{refused:?}"
    );
}

/// The evidence bundle's Twilio entry holds the post: its body as received and the
/// signature that verified, which checks out again with the token.
async fn the_evidence_holds_the_post_as_received(app: &TestApp, phone: &str) {
    let bundle: Value = app
        .admin_get(&format!(
            "/v1/consent/evidence?phoneNumber={}",
            phone.replace('+', "%2B")
        ))
        .await
        .json()
        .await
        .expect("json");
    let item = bundle["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["source"] == "twilio")
        .cloned()
        .unwrap_or_else(|| panic!("a twilio entry: {bundle}"));
    let delivery = &item["evidence"]["delivery"];
    assert_eq!(delivery["kept"], true, "{item}");
    let body = base64::engine::general_purpose::STANDARD
        .decode(delivery["bodyBase64"].as_str().expect("the body"))
        .expect("base64");
    let params = outreach_sync::systems::twilio::signature::form_params(&body);
    let signature = delivery["verifiedHeader"]["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{delivery}"));
    assert_eq!(
        signature,
        sender::signature(TOKEN, PUBLIC_URL, &params),
        "{delivery}"
    );
}

on_both_backends!(a_reply_that_is_not_an_opt_out_records_nothing);
async fn a_reply_that_is_not_an_opt_out_records_nothing(backend: Backend) {
    let Some((sandbox, app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    for (sid, words) in [
        ("SMn1", "stop by at 5?"),
        ("SMn2", "HELP"),
        ("SMn3", "START"),
        ("SMn4", "I want to opt out of this"),
    ] {
        assert_eq!(
            text(&app, sid, &lead.phone_number, words).await.0,
            200,
            "{words}"
        );
    }
    let view = eventually("the replies read", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == 4).then_some(view)
    })
    .await;
    assert_eq!(
        (
            view["ignored"].as_i64(),
            view["optOuts"].as_i64(),
            view["optIns"].as_i64()
        ),
        (Some(2), Some(0), Some(0)),
        "HELP says nothing, START is no opt-in without opt_ins: {view}"
    );
    // The two sentences that hold a revocation word wait for a person.
    assert_eq!(
        waiting_texts(&app).await,
        ["stop by at 5?", "I want to opt out of this"]
    );
    assert!(
        entries_from(&app, "twilio", &lead.phone_number)
            .await
            .is_empty()
    );
    assert!(
        !sandbox
            .leads()
            .iter()
            .any(|l| l.id == lead.id && l.global_opted_out)
    );
}

on_both_backends!(a_post_that_does_not_verify_is_refused_and_kept_nowhere);
async fn a_post_that_does_not_verify_is_refused_and_kept_nowhere(backend: Backend) {
    let Some((sandbox, app)) = texting(backend, &[TOKEN, "twilio-auth-token-2"]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    let params = sender::inbound("SMbad1", &lead.phone_number, "+15005550006", "STOP");
    let other_url = app.url("/sources/twilio-main");
    let refused = [
        post_signed(&app, "another-token", PUBLIC_URL, &params).await,
        post_signed(&app, TOKEN, &other_url, &params).await,
        post_signed(
            &app,
            TOKEN,
            "https://sync.example.org/sources/twilio-other",
            &params,
        )
        .await,
    ];
    for (status, _) in &refused {
        assert_eq!(*status, 403, "{refused:?}");
    }
    // A request Twilio signed, replayed with its body changed.
    let signature = sender::signature(TOKEN, PUBLIC_URL, &params);
    let mut changed = params.clone();
    changed.push(("Body".to_owned(), "START".to_owned()));
    let replayed = (sender::SIGNATURE_HEADER, signature.as_str());
    assert_eq!(
        post_as_is(&app, "twilio-main", &changed, Some(replayed)).await,
        403
    );
    assert_eq!(post_as_is(&app, "twilio-main", &params, None).await, 403);
    // A 1 MiB form, past what a source takes (64 KiB): refused before anything is verified.
    let mut huge = params.clone();
    huge.push(("Padding".to_owned(), "x".repeat(1024 * 1024)));
    assert_eq!(status_of(&app, TOKEN, PUBLIC_URL, &huge).await, 413);
    assert_eq!(post_as_is(&app, "nobody", &params, None).await, 404);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'twilio:%'")
            .await,
        0
    );
    assert!(
        entries_from(&app, "twilio", &lead.phone_number)
            .await
            .is_empty()
    );
    let metrics = app.metrics.render(Default::default());
    for counted in [r#"outcome="rejected"} 5"#, r#"outcome="too_large"} 1"#] {
        let line = format!(r#"outreach_sync_source_posts_total{{source="twilio-main",{counted}"#);
        assert!(metrics.contains(&line), "{line}: {metrics}");
    }
    // The second token (a rotation) is accepted as the first.
    assert_eq!(
        post_signed(&app, "twilio-auth-token-2", PUBLIC_URL, &params)
            .await
            .0,
        200
    );
    eventually("the opt-out under the second token", WAIT, async || {
        !entries_from(&app, "twilio", &lead.phone_number)
            .await
            .is_empty()
    })
    .await;
}

on_both_backends!(a_verified_post_that_cannot_be_read_one_way_is_kept_and_quarantined);
async fn a_verified_post_that_cannot_be_read_one_way_is_kept_and_quarantined(backend: Backend) {
    let Some((sandbox, app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    let mut twice = sender::inbound("SMtwice", &lead.phone_number, "+15005550006", "STOP");
    twice.push(("From".to_owned(), "+15550009999".to_owned()));
    assert_eq!(post_signed(&app, TOKEN, PUBLIC_URL, &twice).await.0, 200);
    let controls = sender::inbound(
        "SMctl",
        &lead.phone_number,
        "+15005550006",
        "\u{1}\u{2}\u{7f}\u{1b}[2J",
    );
    assert_eq!(post_signed(&app, TOKEN, PUBLIC_URL, &controls).await.0, 200);
    let quarantined: Vec<String> = eventually("the ambiguous post quarantined", WAIT, async || {
        let reasons: Vec<String> = app
            .texts("SELECT last_error FROM outbox WHERE state = 'quarantined' AND dedup_key LIKE 'twilio:%'")
            .await;
        (!reasons.is_empty()).then_some(reasons)
    })
    .await;
    assert!(
        quarantined[0].contains("From given twice"),
        "{quarantined:?}"
    );
    let view = eventually("the control characters read", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == 1).then_some(view)
    })
    .await;
    assert_eq!(view["ignored"], 1, "{view}");
    assert!(
        entries_from(&app, "twilio", &lead.phone_number)
            .await
            .is_empty()
    );
    assert!(
        entries_from(&app, "twilio", "+15550009999")
            .await
            .is_empty()
    );
}

on_both_backends!(
    a_flood_of_unverified_posts_to_a_twilio_source_costs_a_bounded_sample_and_delays_no_webhook,
    alone,
    flavor = "multi_thread",
    worker_threads = 4
);
/// The unsigned flood of the attack suite, at a Twilio source: 192 forms of almost 64 KiB
/// (the most a source takes: each is verified, and fails), 16 at a time, signed for another
/// URL, then as many of 1 MiB (refused unread), while the service's signed webhooks keep
/// coming. The webhooks are acknowledged promptly (nine in ten within a second, none past
/// 2.5 s); nothing of the flood is in the outbox, the sample it leaves is bounded and keeps
/// no form over 16 KiB, and the database hardly grows.
async fn a_flood_of_unverified_posts_to_a_twilio_source_costs_a_bounded_sample_and_delays_no_webhook(
    backend: Backend,
) {
    let Some(app) = crate::common::spawn_app_on(backend, |s| {
        s.source = vec![twilio_source(&[TOKEN])];
    })
    .await
    else {
        return;
    };
    let before = crate::hostile::database_bytes(&app).await;
    let app = std::sync::Arc::new(app);
    let flood: Vec<_> = (0..16)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                for (padding, refused) in [(63 * 1024, 403), (1024 * 1024, 413)] {
                    let mut form =
                        sender::inbound("SMflood", "+15550000406", "+15005550006", "STOP");
                    form.push(("Padding".to_owned(), "x".repeat(padding)));
                    for _ in 0..12 {
                        let signed_for = "https://elsewhere.example.org/";
                        let status = status_of(&app, TOKEN, signed_for, &form).await;
                        assert_eq!(status, refused);
                    }
                }
            })
        })
        .collect();
    crate::hostile::acknowledged_promptly_beside(&app, flood, "evt_tw_flood").await;
    let app = std::sync::Arc::into_inner(app).expect("the flood is over");
    let app = app.restart().await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'twilio:%'")
            .await,
        0
    );
    let kept_bodies = crate::hostile::a_bounded_sample_is_all_it_left(&app, before).await;
    assert_eq!(kept_bodies, 0, "no form over 16 KiB is kept");
    app.stop().await;
}

on_both_backends!(a_start_is_recorded_only_where_opt_ins_are_taken);
/// START is an opt-in only with `opt_ins = true`: there, a STOP then a START from one number
/// are an opt-out and an opt-in recorded; without it the START is ignored (the test above).
async fn a_start_is_recorded_only_where_opt_ins_are_taken(backend: Backend) {
    let Some((sandbox, mut app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    app.settings.source[0].opt_ins = true;
    let app = app.restart().await;
    let (lead, _) = opted_in_with_van_id(&sandbox);
    assert_eq!(text(&app, "SMs1", &lead.phone_number, "STOP").await.0, 200);
    assert_eq!(text(&app, "SMs2", &lead.phone_number, "start").await.0, 200);
    let view = eventually("both recorded", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == 2).then_some(view)
    })
    .await;
    assert_eq!(
        (view["optOuts"].as_i64(), view["optIns"].as_i64()),
        (Some(1), Some(1)),
        "{view}"
    );
    let said: Vec<String> = app
        .texts(&format!(
            "SELECT CASE WHEN opted_out THEN 'out' ELSE 'in' END FROM ledger
             WHERE source = 'twilio' AND phone_number = '{}' AND organization_id = '{}'
             ORDER BY seq",
            lead.phone_number, lead.organization_id
        ))
        .await;
    assert_eq!(said, ["out", "in"]);
}

on_both_backends!(
    the_words_people_use_to_revoke_are_each_an_opt_out,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn the_words_people_use_to_revoke_are_each_an_opt_out(backend: Backend) {
    let Some((_sandbox, app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    // Each missed by a filter that takes only the bare word.
    let said = [
        "STOP STOP STOP",
        "STOP 🛑",
        "Stop 🙏",
        "ＳＴＯＰ",
        "Stop texting me",
        "UNSUBSCRIBE ME",
        "stop please",
        "remove me",
        "don't text me",
        "ALTO",
        "PARAR",
        "cancelar",
        "take me off your list",
    ];
    for (i, words) in said.iter().enumerate() {
        let from = format!("+1555012{i:04}");
        let sid = format!("SMwords{i:04}");
        assert_eq!(text(&app, &sid, &from, words).await.0, 200, "{words}");
    }
    let view = eventually("the replies read", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == said.len()).then_some(view)
    })
    .await;
    assert_eq!(
        (view["optOuts"].as_i64(), view["ignored"].as_i64()),
        (Some(said.len() as i64), Some(0)),
        "{view}"
    );
    for (i, words) in said.iter().enumerate() {
        let from = format!("+1555012{i:04}");
        let entries = entries_from(&app, "twilio", &from).await;
        assert!(!entries.is_empty(), "{words}: recorded");
    }
    app.stop().await;
}

on_both_backends!(
    a_sources_own_opt_out_words_revoke_beside_the_fccs,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_sources_own_opt_out_words_revoke_beside_the_fccs(backend: Backend) {
    let Some((_sandbox, mut app)) = texting(backend, &[TOKEN]).await else {
        return;
    };
    app.settings.source[0].opt_out_words = vec!["halt".to_owned(), "ne plus".to_owned()];
    let app = app.restart().await;
    for (sid, from, words) in [
        ("SMown1", "+15550120901", "HALT please"),
        ("SMown2", "+15550120902", "Ne plus!"),
        ("SMown3", "+15550120903", "halt the car"),
    ] {
        assert_eq!(text(&app, sid, from, words).await.0, 200, "{words}");
    }
    let view = eventually("the replies read", WAIT, async || {
        let view = listed(&app, "twilio-main").await;
        (view["read"] == 3).then_some(view)
    })
    .await;
    assert_eq!(view["optOuts"], 2, "{view}");
    assert_eq!(waiting_texts(&app).await, ["halt the car"]);
    app.stop().await;
}

/// The texts of the replies waiting for review, oldest first.
async fn waiting_texts(app: &TestApp) -> Vec<String> {
    let waiting: Value = app
        .admin_get("/v1/review")
        .await
        .json()
        .await
        .expect("json");
    waiting["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["text"].as_str().map(str::to_owned))
        .collect()
}
