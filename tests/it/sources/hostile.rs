//! What a source believes of a system that is wrong, slow or hostile (the trust boundary):
//! a time in 2099 ranks at its reading and never moves a watermark past the read; a link
//! is followed with the key only to the API's own host; a number without its country code
//! is one of the region; a file or a listing that never ends ends the run with an error
//! naming its bound. Each against the sandbox's fakes in their hostile modes, or a stand-in
//! of the test's own where the fake's paths cannot show it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use outreach_sync::settings::SourceSettings;
use outreach_sync_sandbox::destinations::{VanExportSettings, VanMark, VanTarget};
use outreach_sync_sandbox::{DEFAULT_VAN_KEY, RunningSandbox};

use super::faults::{fails, faulty, reading};
use super::{action_network_source, van_source};
use crate::common::{Backend, TestApp, on_both_backends};

/// Seconds from a change in 2026 to one in 2099.
const TO_2099: i64 = 2_300_000_000;

/// The ledger's entries of `phone` from `source`: (opted out, superseded, occurred at).
async fn entries_of(
    app: &TestApp,
    phone: &str,
    source: &str,
) -> Vec<(bool, bool, outreach_sync::model::Timestamp)> {
    app.rows(&format!(
        "SELECT opted_out, superseded, occurred_at FROM ledger
         WHERE phone_number = '{phone}' AND source = '{source}' ORDER BY seq"
    ))
    .await
}

async fn watermark(app: &TestApp, name: &str) -> chrono::DateTime<chrono::Utc> {
    let rows: Vec<(Option<outreach_sync::model::Timestamp>,)> = app
        .rows(&format!(
            "SELECT watermark FROM source_state WHERE source = '{name}'"
        ))
        .await;
    rows[0].0.expect("a watermark").0
}

fn with_opt_ins(
    source: fn(&RunningSandbox) -> SourceSettings,
) -> impl FnOnce(&RunningSandbox) -> SourceSettings {
    move |sandbox| SourceSettings {
        opt_ins: true,
        ..source(sandbox)
    }
}

on_both_backends!(
    an_action_network_time_in_2099_neither_outranks_a_later_unsubscribe_nor_moves_the_watermark_past_the_read,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_action_network_time_in_2099_neither_outranks_a_later_unsubscribe_nor_moves_the_watermark_past_the_read(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, with_opt_ins(action_network_source)).await
    else {
        return;
    };
    // One bad row: subscribed, modified in 2099.
    sandbox.action_network_add_person("12025550111", "subscribed", "2099-01-01T00:00:00Z");
    let first = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(
        (first.counts.opt_ins, first.counts.future),
        (1, 1),
        "{first:?}"
    );
    let after_first = chrono::Utc::now();
    assert!(
        watermark(&app, "an-main").await <= after_first,
        "the watermark stays behind the read's start"
    );
    // The person unsubscribes, now: the next run reads it, and it holds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    sandbox
        .action_network_unsubscribe("+12025550111")
        .expect("unsubscribed");
    let second = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(second.counts.opt_outs, 1, "{second:?}");
    let entries = entries_of(&app, "+12025550111", "action_network").await;
    assert_eq!(
        entries.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
        vec![(false, false), (true, false)],
        "the opt-in at its reading, the later opt-out in force: {entries:?}"
    );
    assert!(entries[0].2.0 <= after_first, "{entries:?}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_van_change_dated_2099_does_not_outrank_a_later_one,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_van_change_dated_2099_does_not_outrank_a_later_one(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, with_opt_ins(van_source)).await else {
        return;
    };
    let van_id = sandbox.van_add_person("+15550009992");
    let mark = |mark| {
        sandbox
            .van_mark(
                DEFAULT_VAN_KEY,
                &VanTarget::VanId(van_id),
                mark,
                "organizer",
            )
            .expect("marked")
    };
    // A VAN whose clock is 73 years ahead: an opt-out "in 2099".
    faulty(
        &sandbox,
        VanExportSettings {
            future_by_secs: Some(TO_2099),
            ..VanExportSettings::default()
        },
    );
    mark(VanMark::OptOut);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let first = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(
        (first.counts.opt_outs, first.counts.future),
        (1, 1),
        "{first:?}"
    );
    // Its clock put right, the person opts in again, later.
    faulty(&sandbox, VanExportSettings::default());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    mark(VanMark::OptIn);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(second.counts.opt_ins, 1, "{second:?}");
    let entries = entries_of(&app, "+15550009992", "van").await;
    assert_eq!(
        entries.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
        vec![(true, false), (false, false)],
        "the later opt-in is not superseded: {entries:?}"
    );
    assert!(watermark(&app, "van-main").await <= chrono::Utc::now());
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    action_networks_numbers_without_a_country_code_are_the_regions_and_invalid_ones_are_ignored,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn action_networks_numbers_without_a_country_code_are_the_regions_and_invalid_ones_are_ignored(
    backend: Backend,
) {
    let Some((sandbox, app, reader)) = reading(backend, action_network_source).await else {
        return;
    };
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for written in [
        "2025550103",
        "+12025550104",
        "12025550105",
        "442079460958",
        "00442079460958",
        "555",
        "call me",
    ] {
        sandbox.action_network_add_person(written, "unsubscribed", &now);
    }
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(
        (report.counts.opt_outs, report.counts.ignored),
        (4, 3),
        "{report:?}"
    );
    let numbers = app
        .texts(
            "SELECT DISTINCT phone_number FROM ledger WHERE source = 'action_network' ORDER BY 1",
        )
        .await;
    assert_eq!(
        numbers,
        [
            "+12025550103",
            "+12025550104",
            "+12025550105",
            "+442079460958"
        ],
        "never +20 (Egypt) for a national number"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    vans_numbers_without_a_dialing_prefix_are_read_in_the_configured_region,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn vans_numbers_without_a_dialing_prefix_are_read_in_the_configured_region(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    let reader = reader.trusting(outreach_sync::model::trust::Trust {
        region: "GB".parse().unwrap(),
        ..Default::default()
    });
    for phone in [
        "020 7946 0958",
        "+1 202 555 0106",
        "0044 20 7946 0959",
        "12",
    ] {
        let van_id = sandbox.van_add_person(phone);
        sandbox
            .van_mark(
                DEFAULT_VAN_KEY,
                &VanTarget::VanId(van_id),
                VanMark::OptOut,
                "banker",
            )
            .expect("marked");
    }
    faulty(
        &sandbox,
        VanExportSettings {
            national_numbers: true,
            ..VanExportSettings::default()
        },
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    let report = reader.run_once(&app.pool).await.expect("reads");
    let numbers = app
        .texts("SELECT DISTINCT phone_number FROM ledger WHERE source = 'van' ORDER BY 1")
        .await;
    // VAN keeps "+1 202 555 0106" as 2025550106 with prefix 1: without its prefix it is
    // a national number, and a national number is the region's.
    assert_eq!(
        numbers,
        ["+442025550106", "+442079460958", "+442079460959"],
        "{report:?}"
    );
    assert!(
        report.counts.ignored >= 1,
        "the number 12 is no number: {report:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_van_file_that_trickles_forever_ends_the_run_at_its_deadline,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_van_file_that_trickles_forever_ends_the_run_at_its_deadline(backend: Backend) {
    let deadline = |sandbox: &RunningSandbox| SourceSettings {
        read_timeout_secs: 3,
        timeout_secs: 2,
        ..van_source(sandbox)
    };
    let Some((sandbox, app, reader)) = reading(backend, deadline).await else {
        return;
    };
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 5, true);
    // A row a second: each byte within the 2 s between reads, the file never whole.
    faulty(
        &sandbox,
        VanExportSettings {
            trickle_ms: Some(1_000),
            ..VanExportSettings::default()
        },
    );
    let began = std::time::Instant::now();
    // Meanwhile `sources` shows the run reading, not an older state.
    let shown = deadline(&sandbox);
    let seen_running = async {
        crate::common::within(Duration::from_secs(10), async || {
            let views = outreach_sync::sources::views(&app.pool, std::slice::from_ref(&shown))
                .await
                .expect("views");
            (views[0].state == outreach_sync::sources::SourceState::Running
                && views[0].running_since.is_some())
            .then_some(())
        })
        .await
    };
    let (error, seen_running) = tokio::join!(fails(&app, &reader), seen_running);
    assert!(seen_running.is_some(), "the run was shown in progress");
    let after = outreach_sync::sources::views(&app.pool, std::slice::from_ref(&shown))
        .await
        .expect("views");
    assert_eq!(after[0].state, outreach_sync::sources::SourceState::Error);
    assert!(after[0].running_since.is_none());
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert!(
        error.error.contains("read_timeout_secs (3 s)"),
        "{}",
        error.error
    );
    let kept: Vec<(Option<String>,)> = app
        .rows("SELECT last_error FROM source_state WHERE source = 'van-main'")
        .await;
    assert!(
        kept[0]
            .0
            .as_deref()
            .is_some_and(|e| e.contains("read_timeout_secs")),
        "{kept:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

/// A system of the test's own on loopback: answers every request with what `answer` gives
/// for its path and query, and keeps each request's path and the token it carried.
struct StandIn {
    addr: SocketAddr,
    seen: Seen,
}

/// Each request's path and query, and the key it carried.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

type Answer = Arc<dyn Fn(&str) -> (StatusCode, String) + Send + Sync>;

async fn stand_in(ip: &str, answer: Answer) -> StandIn {
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
        let (kept, answer) = (kept.clone(), answer.clone());
        async move {
            let token = headers
                .get("osdi-api-token")
                .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
            let path = uri
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default();
            kept.lock().unwrap().push((path.clone(), token));
            let (status, body) = answer(&path);
            (status, [("content-type", "application/json")], body)
        }
    });
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    StandIn { addr, seen }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_an_answer_gives_takes_the_key_to_the_apis_own_host_alone() {
    let Some((sandbox, app, _)) = reading(Backend::Sqlite, action_network_source).await else {
        return;
    };
    // Where a leaked key would go: another address of this machine.
    let empty = r#"{"_embedded":{"osdi:people":[]},"_links":{}}"#.to_owned();
    let elsewhere_page = empty.clone();
    let elsewhere = stand_in(
        "127.0.0.2",
        Arc::new(move |_| (StatusCode::OK, elsewhere_page.clone())),
    )
    .await;
    let port = elsewhere.addr.port();
    let next: Arc<Mutex<String>> = Arc::default();
    let first = next.clone();
    // Action Network at the root of its host, as `base_url = "http://127.0.0.1:PORT"`.
    let api = stand_in(
        "127.0.0.1",
        Arc::new(move |path: &str| {
            if path.starts_with("/people?filter") {
                let href = first.lock().unwrap().clone();
                let page = serde_json::json!({"_embedded": {"osdi:people": []},
                    "_links": {"next": {"href": href}}});
                (StatusCode::OK, page.to_string())
            } else {
                (StatusCode::OK, empty.clone())
            }
        }),
    )
    .await;
    let mut settings = action_network_source(&sandbox);
    settings.base_url = format!("http://127.0.0.1:{}", api.addr.port());
    let served = app.settings.account_ids().expect("accounts");
    let reader = outreach_sync::sources::Reader::new(&settings, &served).expect("reader");
    let api_port = api.addr.port();
    let relative = [
        format!("@127.0.0.2:{port}/people?page=2"),
        format!(":{port}/people?page=2"),
        ".127.0.0.2/people?page=2".to_owned(),
        format!("%2F%2F127.0.0.2:{port}/people?page=2"),
    ];
    for href in &relative {
        *next.lock().unwrap() = href.clone();
        let run = reader.run_once(&app.pool).await;
        assert!(run.is_ok(), "{href}: followed on the API's host: {run:?}");
    }
    let away = [
        format!("//127.0.0.2:{port}/people?page=2"),
        format!("\\\\127.0.0.2:{port}/people?page=2"),
        format!("http://127.0.0.2:{port}/people?page=2"),
        format!("http://127.0.0.1:{port}/people?page=2"),
        format!("http://[::1]:{api_port}/people?page=2"),
        format!("http://key@127.0.0.1:{api_port}/people?page=2"),
    ];
    for href in &away {
        *next.lock().unwrap() = href.clone();
        let error = fails(&app, &reader).await;
        assert!(
            error.error.contains("leads away from the API's host"),
            "{href}: {}",
            error.error
        );
    }
    assert!(
        elsewhere.seen.lock().unwrap().is_empty(),
        "nothing reached another host: {:?}",
        elsewhere.seen.lock().unwrap()
    );
    let on_the_api = api.seen.lock().unwrap().clone();
    assert!(
        on_the_api.iter().all(|(_, token)| token.is_some()),
        "{on_the_api:?}"
    );
    assert!(
        on_the_api
            .iter()
            .any(|(path, _)| path == &format!("/@127.0.0.2:{port}/people?page=2")),
        "{on_the_api:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_download_answered_with_a_redirect_is_not_followed_and_says_so,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_download_answered_with_a_redirect_is_not_followed_and_says_so(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    let empty = r#"{}"#.to_owned();
    let elsewhere = stand_in(
        "127.0.0.2",
        Arc::new(move |_| (StatusCode::OK, empty.clone())),
    )
    .await;
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 3, true);
    faulty(
        &sandbox,
        VanExportSettings {
            redirect_downloads_to: Some(format!("http://{}/file.csv", elsewhere.addr)),
            ..VanExportSettings::default()
        },
    );
    let error = fails(&app, &reader).await;
    assert!(
        error
            .error
            .contains("answered 302 Found: redirects are not followed"),
        "{}",
        error.error
    );
    assert!(elsewhere.seen.lock().unwrap().is_empty(), "not followed");
    app.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_stops_coming_is_no_answer_within_the_timeout_not_json_cut_short() {
    use futures::StreamExt as _;
    let Some((sandbox, app, _)) = reading(Backend::Sqlite, action_network_source).await else {
        return;
    };
    // A page whose first bytes come at once and the rest never within the timeout.
    let app_router = axum::Router::new().fallback(|| async {
        let chunks = futures::stream::iter([0u64, 3]).then(|wait| async move {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"_embedded\": "))
        });
        (
            [("content-type", "application/json")],
            axum::body::Body::from_stream(chunks),
        )
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app_router).await });
    let mut settings = action_network_source(&sandbox);
    settings.base_url = format!("http://{addr}");
    settings.timeout_secs = 1;
    let served = app.settings.account_ids().expect("accounts");
    let reader = outreach_sync::sources::Reader::new(&settings, &served).expect("reader");
    let error = fails(&app, &reader).await;
    assert!(
        error
            .error
            .contains("the people: the answer did not come whole within the timeout"),
        "{}",
        error.error
    );
    assert!(error.passing, "tried again sooner: {error:?}");
    app.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_network_check_says_what_its_key_reads() {
    let Some((sandbox, app, reader)) = reading(Backend::Sqlite, action_network_source).await else {
        return;
    };
    let found = reader.check().await.expect("checked");
    assert_eq!(found, ["the key reads the people (none yet)"]);
    sandbox.action_network_seed(2);
    let found = reader.check().await.expect("checked");
    assert_eq!(
        found,
        ["the key reads the people (a page of one person answered)"]
    );
    app.stop().await;
    sandbox.shutdown().await;
}
