//! Destinations that fail: lookups answered with garbage or nothing, refused credentials,
//! a committee that lacks what is named, throttling, outages and redirects.

use super::*;

on_both_backends!(
    lookups_answered_with_garbage_ten_megabytes_or_nothing_are_retried_until_they_answer,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn lookups_answered_with_garbage_ten_megabytes_or_nothing_are_retried_until_they_answer(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    // The committee's lookups come first: the sender's own first attempt meets the hang,
    // each attempt asked for after it the next fault.
    for fault in [FakeFault::Hang, FakeFault::Garbage, FakeFault::Huge] {
        sandbox.fake_fail_next(Fake::Van, 1, fault);
    }
    let began = std::time::Instant::now();
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.senders.started("van-main").await;
    let mut errors = Vec::new();
    while errors.len() < 2 {
        match app.senders.try_now("van-main").await.expect("an attempt") {
            Attempt::Failed { error, .. } => errors.push(error),
            other => panic!("a failed lookup, not {other:?} (after {errors:?})"),
        }
    }
    assert!(
        began.elapsed() >= outreach_sync::sender::REQUEST_TIMEOUT,
        "the hanging lookup held the first attempt until it timed out"
    );
    let view_after = view(&app, "van-main").await;
    assert_eq!(view_after["state"], "retrying", "{view_after}");
    assert!(errors[0].contains("not the JSON expected"), "{errors:?}");
    assert!(errors[1].contains("over 1048576 bytes"), "{errors:?}");
    assert!(errors.iter().all(|e| !e.contains(DEFAULT_VAN_KEY)));
    // Then the fake answers, and everything goes.
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "active", "{view}");
    assert_eq!(sandbox.van_truth().requests.injected_faults, 3);
    let sent = view["sent"].as_u64().expect("sent");
    assert!(sent > 0, "{view}");
    assert_eq!(sandbox.van_truth().canvass_responses.len() as u64, sent);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    credentials_refused_stop_the_destination_and_lose_nothing_until_retried,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn credentials_refused_stop_the_destination_and_lose_nothing_until_retried(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    assert!(sandbox.van_revoke(DEFAULT_VAN_KEY, Some(401)));
    let app = writing_to(app, vec![van(&sandbox)]).await;
    // Stopped by the sender's first attempt, or by the settle's.
    let settled = app.settle().await;
    assert!(
        matches!(
            &settled[..],
            [(_, Attempt::Stopped(_) | Attempt::Waiting(_))]
        ),
        "{settled:?}"
    );
    let stopped = view(&app, "van-main").await;
    assert_eq!(stopped["state"], "error", "{stopped}");
    assert_eq!(stopped["sent"], 0, "{stopped}");
    let error = stopped["lastError"].as_str().expect("an error");
    assert!(error.starts_with("credentials: "), "{error}");
    assert!(!error.contains(DEFAULT_VAN_KEY), "the key is never shown");
    assert!(sandbox.van_truth().canvass_responses.is_empty());

    // The key works again: everything waiting goes.
    assert!(sandbox.van_revoke(DEFAULT_VAN_KEY, None));
    let retried = app
        .admin_post("/v1/destinations/van-main/retry", &serde_json::json!({}))
        .await;
    assert_eq!(retried.status(), 200);
    app.settle().await;
    let after = view(&app, "van-main").await;
    assert_eq!(after["state"], "active", "{after}");
    let written = after["sent"].as_i64().unwrap_or(0) + after["unmatched"].as_i64().unwrap_or(0);
    assert_eq!(written as usize, opt_outs(&app).await.len(), "{after}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_committee_without_sms_text_sends_nothing_and_says_what_is_missing,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_committee_without_sms_text_sends_nothing_and_says_what_is_missing(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, false));
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "error", "{view}");
    let error = view["lastError"].as_str().expect("an error");
    assert!(
        error.contains("no contact type named \"SMS Text\""),
        "{error}"
    );
    assert!(sandbox.van_truth().canvass_responses.is_empty());

    let http = outreach_sync::sender::http_client().expect("client");
    let checked =
        outreach_sync::sender::destinations::check(&app.settings.destination, None, &http)
            .await
            .expect("checked");
    let problem = checked[0].problem.as_deref().expect("a problem");
    assert!(problem.contains("SMS Text"), "{problem}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    throttling_and_outages_are_retried_and_a_redirect_is_never_followed,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn throttling_and_outages_are_retried_and_a_redirect_is_never_followed(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    for fault in [
        FakeFault::Status {
            status: 429,
            retry_after_secs: Some(1),
        },
        FakeFault::Status {
            status: 503,
            retry_after_secs: None,
        },
        FakeFault::Redirect {
            location: Some(format!("{}/people", sandbox.action_network_url())),
        },
        FakeFault::Garbage,
    ] {
        sandbox.fake_fail_next(Fake::ActionNetwork, 1, fault);
    }
    let app = writing_to(app, vec![action_network(&sandbox)]).await;
    let total = opt_outs(&app).await.len();
    // Each attempt, the sender's own or a settle's, meets the next fault until none is left.
    let done = common::eventually(
        "every opt-out in Action Network",
        std::time::Duration::from_secs(30),
        async || {
            app.settle().await;
            let view = view(&app, "action-network").await;
            (view["sent"] == total).then_some(view)
        },
    )
    .await;
    assert_eq!(done["state"], "active", "{done}");
    assert_eq!(sandbox.action_network_truth().requests.injected_faults, 4);
    // 429, 503 and the redirect were retried: followed, the redirect would have been
    // refused (a GET of the collection). A 200 of garbage is a success: its body is not read.
    let metrics = app.metrics.render(Default::default());
    let count = |outcome: &str| {
        let series = format!(
            "outreach_sync_destination_requests_total{{destination=\"action-network\",outcome=\"{outcome}\"}}"
        );
        common::series_value(&metrics, &series).map_or(0, |n| n.parse::<u64>().expect("a count"))
    };
    assert_eq!(count("failed"), 3, "{metrics}");
    assert_eq!(count("refused"), 0, "{metrics}");
    assert_eq!(count("sent") as usize, total, "{metrics}");
    let error = done["lastError"].as_str().unwrap_or_default();
    assert!(!error.contains(DEFAULT_ACTION_NETWORK_KEY));
    app.stop().await;
    sandbox.shutdown().await;
}
