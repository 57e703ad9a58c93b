//! What a source does with what it cannot read: each is a clear error of the run, its
//! watermark stays, and nothing read before it is recorded twice; and two runs at once (a
//! `sources run` beside the daemon) record each record once.

use outreach_sync::settings::SourceSettings;
use outreach_sync::sources::{Reader, RunError, RunReport};
use outreach_sync_sandbox::destinations::VanExportSettings;
use outreach_sync_sandbox::{DEFAULT_VAN_KEY, RunningSandbox};

use super::{action_network_source, van_source};
use crate::common::{Backend, TestApp, on_both_backends};
use crate::destinations::campaign;

/// A campaign's daemon (no source of its own, so that the test's runs are the only ones)
/// and a reader of `source`.
pub(super) async fn reading(
    backend: Backend,
    source: impl FnOnce(&RunningSandbox) -> SourceSettings,
) -> Option<(RunningSandbox, TestApp, Reader)> {
    let (sandbox, app) = campaign(backend).await?;
    let mut settings = source(&sandbox);
    settings.job_timeout_secs = 2;
    let served = app.settings.account_ids().expect("accounts");
    let reader = Reader::new(&settings, &served).expect("reader");
    Some((sandbox, app, reader))
}

pub(super) fn faulty(sandbox: &RunningSandbox, export: VanExportSettings) {
    assert!(sandbox.van_set_export(DEFAULT_VAN_KEY, export));
}

pub(super) async fn fails(app: &TestApp, reader: &Reader) -> RunError {
    match reader.run_once(&app.pool).await {
        Ok(report) => panic!("the run read to its end: {report:?}"),
        Err(error) => error,
    }
}

pub(super) async fn entries_from(app: &TestApp, source: &str) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM ledger WHERE source = '{source}'"
    ))
    .await
}

on_both_backends!(
    a_file_without_a_column_it_needs_is_an_error_naming_it,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_file_without_a_column_it_needs_is_an_error_naming_it(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 50, true);
    faulty(
        &sandbox,
        VanExportSettings {
            missing_column: Some("ResultID".into()),
            ..VanExportSettings::default()
        },
    );
    let error = fails(&app, &reader).await;
    assert!(
        error.error.contains("no column ResultID"),
        "{}",
        error.error
    );
    assert_eq!(entries_from(&app, "van").await, 0);
    // Put right, the same window is read again, whole.
    faulty(&sandbox, VanExportSettings::default());
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(report.counts.opt_outs, 50, "{report:?}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_garbage_row_is_ignored_and_the_good_rows_are_recorded,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_garbage_row_is_ignored_and_the_good_rows_are_recorded(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 40, true);
    faulty(
        &sandbox,
        VanExportSettings {
            garbage_row: true,
            ..VanExportSettings::default()
        },
    );
    let report: RunReport = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(report.counts.opt_outs, 40, "{report:?}");
    assert!(report.counts.ignored >= 1, "{report:?}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_stuck_job_an_error_job_and_an_expired_link_are_errors_saying_so,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_stuck_job_an_error_job_and_an_expired_link_are_errors_saying_so(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 10, true);
    for (export, says) in [
        (
            VanExportSettings {
                stuck: true,
                ..VanExportSettings::default()
            },
            "is still InProcess",
        ),
        (
            VanExportSettings {
                error: Some("Export failed: try again".into()),
                ..VanExportSettings::default()
            },
            "Export failed: try again",
        ),
        (
            VanExportSettings {
                expired_urls: true,
                ..VanExportSettings::default()
            },
            "403",
        ),
    ] {
        faulty(&sandbox, export);
        let error = fails(&app, &reader).await;
        assert!(error.error.contains(says), "{says}: {}", error.error);
    }
    assert_eq!(entries_from(&app, "van").await, 0);
    assert!(sandbox.van_truth().download_credentials_seen.is_empty());
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_file_past_the_bound_is_an_error_and_costs_no_memory,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_file_past_the_bound_is_an_error_and_costs_no_memory(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 10, true);
    faulty(
        &sandbox,
        VanExportSettings {
            huge_file: true,
            ..VanExportSettings::default()
        },
    );
    let error = fails(&app, &reader).await;
    assert!(error.error.contains("is over 256 MiB"), "{}", error.error);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    an_action_network_listing_that_never_ends_is_an_error,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_action_network_listing_that_never_ends_is_an_error(backend: Backend) {
    let bounded = |sandbox: &RunningSandbox| SourceSettings {
        max_pages: 5,
        ..action_network_source(sandbox)
    };
    let Some((sandbox, app, reader)) = reading(backend, bounded).await else {
        return;
    };
    sandbox.action_network_seed(30);
    sandbox.action_network_endless_next(true);
    let error = fails(&app, &reader).await;
    assert!(
        error.error.contains("goes on past max_pages (5)"),
        "{}",
        error.error
    );
    assert_eq!(
        sandbox.action_network_truth().requests.total,
        5,
        "five pages, then the bound"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    two_runs_at_once_record_each_record_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn two_runs_at_once_record_each_record_once(backend: Backend) {
    let Some((sandbox, app, reader)) = reading(backend, van_source).await else {
        return;
    };
    let served = app.settings.account_ids().expect("accounts");
    let mut settings = van_source(&sandbox);
    settings.job_timeout_secs = 30;
    let other = Reader::new(&settings, &served).expect("reader");
    sandbox.van_seed_changes(DEFAULT_VAN_KEY, 2_000, true);
    let (a, b) = tokio::join!(reader.run_once(&app.pool), other.run_once(&app.pool));
    let (a, b) = (a.expect("a"), b.expect("b"));
    assert_eq!(a.counts.opt_outs + b.counts.opt_outs, 2_000, "{a:?} {b:?}");
    assert_eq!(a.counts.read + b.counts.read, 2_000, "{a:?} {b:?}");
    // Each number once, account-wide (no lead holds the seeded numbers).
    assert_eq!(entries_from(&app, "van").await, 2_000);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    with_opt_ins_an_opt_in_read_back_is_recorded,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn with_opt_ins_an_opt_in_read_back_is_recorded(backend: Backend) {
    let Some((sandbox, app, _)) = reading(backend, van_source).await else {
        return;
    };
    let mut settings = van_source(&sandbox);
    settings.opt_ins = true;
    let served = app.settings.account_ids().expect("accounts");
    let reader = Reader::new(&settings, &served).expect("reader");
    let van_id = sandbox.van_add_person("+15550009991");
    sandbox
        .van_mark(
            DEFAULT_VAN_KEY,
            &outreach_sync_sandbox::destinations::VanTarget::VanId(van_id),
            outreach_sync_sandbox::destinations::VanMark::OptIn,
            "organizer",
        )
        .expect("marked");
    // VAN's times are in milliseconds and a window ends before its `dateChangedTo`: a run in
    // the very millisecond of the change leaves it to the next run's overlap.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let report = reader.run_once(&app.pool).await.expect("reads");
    assert_eq!(
        (report.counts.opt_ins, report.counts.opt_outs),
        (1, 0),
        "recorded, counted as an opt-in: {report:?}"
    );
    let kept: Vec<(i64, i64)> = app
        .rows("SELECT opt_ins, opt_outs FROM source_state WHERE source = 'van-main'")
        .await;
    assert_eq!(kept, vec![(1, 0)], "the source's row counts it so");
    let rows: Vec<(bool,)> = app
        .rows("SELECT opted_out FROM ledger WHERE phone_number = '+15550009991' AND source = 'van'")
        .await;
    assert_eq!(rows, vec![(false,)], "an account-wide opt-in");
    app.stop().await;
    sandbox.shutdown().await;
}
