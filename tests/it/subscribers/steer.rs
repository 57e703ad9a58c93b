//! Subscribers across processes and from the command line: replicas on PostgreSQL, the
//! `subscribers` commands, and trying at once.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_entries_committed_on_any_replica_reach_the_subscriber_once_in_order() {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let Some(first) = spawn_app_on(Backend::Postgres, |s| {
        subscribe(s, "crm", &url);
        s.replica.name = "first".into();
    })
    .await
    else {
        return;
    };
    let second = first.replica("second").await;

    // Half the deliveries to each replica: whichever leads hears of the other's commits.
    for i in 0..40 {
        let body = consent_event(&format!("evt_{i}"), &format!("+1555400{i:04}"), true);
        let response = if i % 2 == 0 {
            first.post_signed(&body).await
        } else {
            let headers = first.sign_with(crate::common::SECRET, body.as_bytes());
            let mut request = first
                .http
                .post(format!(
                    "http://{}{}",
                    second.addr, first.settings.ingest.path
                ))
                .body(body.clone());
            for (name, value) in headers {
                request = request.header(name, value);
            }
            request.send().await.expect("post")
        };
        assert_eq!(response.status(), 200);
    }
    first.drain().await;
    let seqs: Vec<i64> = (1..=40).collect();
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    assert!(receiver.received().iter().all(|r| r.verified));
    second.stop().await;
    first.stop().await;
}

// Multi-threaded: the commands run as blocking child processes while the daemon sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subscribers_commands_show_and_rewind_a_subscriber() {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 3).await;
    app.settle().await;
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    assert_eq!(subscriber_view(&app, "crm").await["cursor"], 3);

    let config = app.dir.path().join("subscribers.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = {:?}\n\n[[subscriber]]\nname = \"crm\"\nurl = {url:?}\nsecret = {SUBSCRIBER_SECRET:?}\n",
            app.settings.database.url
        ),
    )
    .expect("config");
    let run = |args: &[&str]| {
        std::process::Command::new(crate::daemon_process::BIN)
            .arg("--config")
            .arg(&config)
            .args(args)
            .env_remove("OUTREACH_SYNC__DATABASE__URL")
            .output()
            .expect("run")
    };
    let listed = run(&["subscribers", "--json"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(listed["items"][0]["cursor"], 3);
    assert_eq!(listed["items"][0]["state"], "active");
    let text = String::from_utf8_lossy(&run(&["subscribers"]).stdout).into_owned();
    assert!(
        text.starts_with("crm -> ") && text.contains("active, cursor 3"),
        "{text}"
    );

    let rewound = run(&["subscribers", "replay", "crm", "--from", "2", "--json"]);
    assert!(
        rewound.status.success(),
        "{}",
        String::from_utf8_lossy(&rewound.stderr)
    );
    let rewound: Value = serde_json::from_slice(&rewound.stdout).expect("JSON");
    assert_eq!(rewound["cursor"], 1);
    // The daemon, another process, sends entries 2 and 3 again within a poll.
    receiver
        .wait_for(PATIENCE, |r| {
            r.iter().filter(|r| r.seqs.contains(&2)).count() == 2
        })
        .await;
    assert_eq!(
        run(&["subscribers", "replay", "nobody", "--from", "1"])
            .status
            .code(),
        Some(3)
    );
    let forward = run(&["subscribers", "replay", "crm", "--from", "99"]);
    assert_eq!(forward.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&forward.stderr).contains("only rewinds"));
    app.stop().await;
}

#[tokio::test]
async fn a_sender_asked_to_try_at_once_does_not_wait_out_its_retry_after() {
    // Ten minutes to wait, as the subscriber asked.
    let receiver = Receiver::start([Reply::TooManyRequests(600)]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 2).await;
    receiver.wait_for(PATIENCE, |r| r.len() == 1).await;
    let view = wait_for_view(&app, "crm", |v| v["state"] == "retrying").await;
    assert!(view["nextAttemptAt"].is_string(), "{view}");

    let settled = app.settle().await;
    assert_eq!(settled, [("crm".to_owned(), Attempt::Idle)]);
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    assert_eq!(
        receiver.received().len(),
        2,
        "the 429, then the entries at once"
    );
    let view = subscriber_view(&app, "crm").await;
    assert_eq!(view["state"], "active", "{view}");
    assert_eq!(view["cursor"], 2, "{view}");
    assert!(view["nextAttemptAt"].is_null(), "{view}");
    app.stop().await;
}

/// As found: a subscriber that was down came back to a backoff grown toward 10 minutes, so
/// the campaign's dialer could be minutes late with an opt-out after it was healthy again.
/// An operator can now have it tried at once, by the admin API or the command line.
#[tokio::test]
async fn a_subscriber_in_backoff_is_tried_at_once_when_asked_by_the_api_or_the_command_line() {
    // Ten minutes to wait, as the subscriber asked, twice.
    let receiver =
        Receiver::start([Reply::TooManyRequests(600), Reply::TooManyRequests(600)]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 1).await;
    receiver.wait_for(PATIENCE, |r| r.len() == 1).await;
    wait_for_view(&app, "crm", |v| v["state"] == "retrying").await;

    // The API asks this daemon's sender, which tries at once: the second 429.
    let response = app
        .admin_post("/v1/subscribers/crm/retry", &serde_json::json!({}))
        .await;
    assert_eq!(response.status(), 200);
    let view: Value = response.json().await.expect("json");
    assert_eq!(view["name"], "crm");
    assert_eq!(receiver.received().len(), 2, "tried at once");
    assert_eq!(
        app.admin_post("/v1/subscribers/nobody/retry", &serde_json::json!({}))
            .await
            .status(),
        404
    );

    // The command line, another process, makes the attempt due; the sender sees it.
    let config = app.dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"{}\"\n\n[[subscriber]]\nname = \"crm\"\nurl = \"{url}\"\nsecret = \"{SUBSCRIBER_SECRET}\"\n",
            app.settings.database.url
        ),
    )
    .unwrap();
    let out = crate::cli::run(
        app.dir.path(),
        &[
            "subscribers",
            "retry",
            "crm",
            "--json",
            "--config",
            config.to_str().unwrap(),
        ],
        &[("OUTREACH_SYNC__DATABASE__URL", &app.settings.database.url)],
        "",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(view["name"], "crm");
    assert!(view["nextAttemptAt"].is_null(), "{view}");
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    app.stop().await;
}

on_both_backends!(a_subscriber_with_the_default_sources_gets_imported_opt_outs);
async fn a_subscriber_with_the_default_sources_gets_imported_opt_outs(backend: Backend) {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let Some(app) = spawn_app_on(backend, |s| subscribe(s, "crm", &url)).await else {
        return;
    };
    let response = app
        .http
        .post(app.admin_url("/v1/consent/import?org=org_1"))
        .bearer_auth(crate::common::ADMIN_TOKEN)
        .body("phone\n+15550009901\n+15550009902\n")
        .send()
        .await
        .expect("import");
    assert_eq!(response.status(), 200);
    app.settle().await;
    receiver.wait_for_seqs(PATIENCE, &[1, 2]).await;
    let sources: Vec<String> = receiver
        .received()
        .iter()
        .flat_map(|r| {
            r.body["data"]["items"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|item| item["source"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(sources, ["import", "import"]);
    app.stop().await;
}
