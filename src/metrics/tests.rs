use super::*;

fn account(name: &str) -> AccountId {
    AccountId::new(name).expect("an account's name")
}

fn gauges() -> Gauges {
    Gauges {
        outbox_backlog: 7,
        apply_lag_seconds: 1.5,
        quarantined: 1,
        pushes_pending: 2,
        subscriber_lag: vec![("crm".into(), 12)],
        destination_lag: vec![("van-main".into(), 4)],
        destination_error: vec![("van-main".into(), 1), ("action-network".into(), 0)],
        registration_ok: Some(false),
        optout_oldest_pending: vec![("service".into(), 0.0), ("crm".into(), 3600.25)],
        optouts_overdue: 3,
        review_waiting: 2,
        review_oldest_due_seconds: Some(-60.0),
        review_oldest_deadline_used: 1.25,
    }
}

#[test]
fn the_rendering_has_a_help_and_type_line_for_every_family_and_labelled_samples() {
    let m = Metrics::new();
    let (party, candidate) = (account("party"), account("candidate"));
    m.serving(&[party.clone(), candidate.clone()]);
    m.delivery(Some(&party), Delivery::BacklogFull);
    m.delivery(None, Delivery::UnknownPath);
    m.upstream_status(&party, 429);
    m.upstream_status(&candidate, 9);
    m.record_reconcile_pass(&party, 10, 2, 3, 0);
    m.push(&candidate, Push::Sent);
    m.subscriber_request("crm", SubscriberOutcome::Failed);
    m.subscriber_request("crm", SubscriberOutcome::Failed);
    m.connection_closed(Listener::Ingest, Closed::Evicted);
    m.auth_failure(AuthAttempt::SignIn, AuthOutcome::Limited);
    let text = m.render(gauges());
    for line in [
        "outreach_sync_optout_oldest_pending_seconds{destination=\"crm\"} 3600.25",
        "outreach_sync_optout_oldest_pending_seconds{destination=\"service\"} 0.0",
        "outreach_sync_optouts_overdue 3",
        "outreach_sync_messages_after_optout_total 0",
        "outreach_sync_subscriber_requests_total{subscriber=\"crm\",outcome=\"failed\"} 2",
        "outreach_sync_subscriber_lag_entries{subscriber=\"crm\"} 12",
        "outreach_sync_destination_lag_entries{destination=\"van-main\"} 4",
        "outreach_sync_destination_error{destination=\"van-main\"} 1",
        "outreach_sync_destination_error{destination=\"action-network\"} 0",
        "outreach_sync_deliveries_total{account=\"party\",outcome=\"backlog_full\"} 1",
        "outreach_sync_deliveries_total{outcome=\"unknown_path\"} 1",
        "outreach_sync_deliveries_total{account=\"candidate\",outcome=\"accepted\"} 0",
        "outreach_sync_deliveries_total{account=\"party\",outcome=\"too_large\"} 0",
        "outreach_sync_upstream_responses_total{account=\"party\",status=\"429\"} 1",
        "outreach_sync_upstream_responses_total{account=\"candidate\",status=\"other\"} 1",
        "outreach_sync_upstream_responses_total{account=\"party\",status=\"error\"} 0",
        "outreach_sync_reconcile_repairs_total{account=\"party\"} 2",
        "outreach_sync_reconcile_repairs_total{account=\"candidate\"} 0",
        "outreach_sync_reconcile_passes_total{account=\"party\"} 1",
        "outreach_sync_outbox_backlog 7",
        "outreach_sync_apply_lag_seconds 1.5",
        "outreach_sync_pushes_total{account=\"candidate\",outcome=\"sent\"} 1",
        "outreach_sync_pushes_total{account=\"party\",outcome=\"retry\"} 0",
        "outreach_sync_registration_ok 0",
        "outreach_sync_leader 0",
        "outreach_sync_connections_open{listener=\"admin\"} 0",
        "outreach_sync_change_feed_waiting 0",
        "outreach_sync_connections_closed_total{listener=\"ingest\",reason=\"evicted\"} 1",
        "outreach_sync_connections_closed_total{listener=\"admin\",reason=\"header_timeout\"} 0",
        "outreach_sync_admin_auth_failures_total{attempt=\"signin\",outcome=\"limited\"} 1",
        "# TYPE outreach_sync_deliveries_total counter",
        "# TYPE outreach_sync_leader gauge",
        "# HELP outreach_sync_reconcile_passes_total Reconciliation passes.",
        "# HELP outreach_sync_outbox_backlog Deliveries committed but not yet applied.",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing in:\n{text}"
        );
    }
    assert!(!text.contains("# EOF"), "{text}");
    let unchecked = m.render(Gauges::default());
    assert!(unchecked.contains("# TYPE outreach_sync_registration_ok gauge\n"));
    assert!(!unchecked.contains("outreach_sync_registration_ok 0"));
    let fresh = Metrics::new().render(Gauges::default());
    let families = |text: &str| text.lines().filter(|l| l.starts_with("# TYPE")).count();
    assert_eq!(
        families(&fresh),
        38,
        "every family, before anything is counted:\n{fresh}"
    );
    assert!(
        !fresh.contains("outreach_sync_subscriber_requests_total{"),
        "{fresh}"
    );
    assert!(
        !fresh.contains("outreach_sync_pushes_total{"),
        "an account's series wait for it to be served:\n{fresh}"
    );
    let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
    let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
    assert_eq!(helps, types);
    assert_eq!(types, 38, "{text}");
}

#[test]
fn a_batch_counts_its_rows_echoes_and_messages_after_an_opt_out() {
    let m = Metrics::new();
    m.applied(3, 1);
    m.echoes(1);
    m.messages_after_opt_out(2);
    let text = m.render(Gauges::default());
    assert!(
        text.contains("outreach_sync_events_applied_total 3\n"),
        "{text}"
    );
    assert!(
        text.contains("outreach_sync_events_quarantined_total 1\n"),
        "{text}"
    );
    assert!(
        text.contains("outreach_sync_echoes_recognised_total 1\n"),
        "{text}"
    );
    assert!(
        text.contains("outreach_sync_messages_after_optout_total 2\n"),
        "{text}"
    );
}

#[test]
fn two_registries_count_apart() {
    let (one, other) = (Metrics::new(), Metrics::new());
    one.connection_closed(Listener::Admin, Closed::Idle);
    assert_eq!(one.connections_closed(Listener::Admin, Closed::Idle), 1);
    assert_eq!(other.connections_closed(Listener::Admin, Closed::Idle), 0);
}
