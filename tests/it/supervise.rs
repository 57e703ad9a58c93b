//! Supervision of the daemon's background tasks: a task that fails is restarted after a
//! delay doubling from one second to a cap (timed on a paused clock); a task that panics
//! stops the daemon, in-process and as the real `serve`, which then exits non-zero.

use std::sync::Arc;
use std::time::Duration;

use outreach_sync::app::{
    Application, FIRST_RESTART_DELAY, HEALTHY_RUN, MAX_RESTART_DELAY, Supervisor,
};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::common::{self, consent_event};
use crate::daemon_process;

/// How a test task behaves on its n-th run (from 0).
#[derive(Clone, Copy)]
enum Run {
    /// Returns an error at once.
    Fail,
    /// Runs this long, then returns an error.
    FailAfter(Duration),
    /// Runs until the shutdown, then returns `Ok`.
    Serve,
}

/// A supervisor with one task named `flaky` that behaves as `script` says on each run and
/// reports the (paused) time each run started.
fn supervise_script(script: Vec<Run>) -> (Supervisor, mpsc::UnboundedReceiver<Instant>) {
    let (started, starts) = mpsc::unbounded_channel();
    let mut supervisor = Supervisor::default();
    let mut runs = script.into_iter();
    supervisor.add("flaky", move |shutdown: CancellationToken| {
        let run = runs.next().unwrap_or(Run::Serve);
        let started = started.clone();
        async move {
            started.send(Instant::now())?;
            match run {
                Run::Fail => anyhow::bail!("cannot do its work"),
                Run::FailAfter(after) => {
                    tokio::time::sleep(after).await;
                    anyhow::bail!("cannot do its work any more")
                }
                Run::Serve => {
                    shutdown.cancelled().await;
                    Ok(())
                }
            }
        }
    });
    (supervisor, starts)
}

/// The start times of the next `n` runs, as offsets from `origin`.
async fn next_starts(
    starts: &mut mpsc::UnboundedReceiver<Instant>,
    origin: Instant,
    n: usize,
) -> Vec<Duration> {
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let at = starts.recv().await.expect("the task runs again");
        offsets.push(at - origin);
    }
    offsets
}

fn secs(offsets: &[u64]) -> Vec<Duration> {
    offsets.iter().copied().map(Duration::from_secs).collect()
}

#[tokio::test(start_paused = true)]
async fn a_failing_task_is_restarted_after_a_delay_doubling_from_one_second_to_the_cap() {
    assert_eq!(FIRST_RESTART_DELAY, Duration::from_secs(1));
    assert_eq!(MAX_RESTART_DELAY, Duration::from_secs(60));
    let (mut supervisor, mut starts) = supervise_script(vec![Run::Fail; 8]);
    let shutdown = CancellationToken::new();
    let origin = Instant::now();
    let supervised = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { supervisor.run(&shutdown).await }
    });

    // Waits of 1, 2, 4, 8, 16, 32, then 60 and 60 s: the clock is paused and moves on
    // only to the next timer, so each start is exactly at the end of its delay.
    let started = next_starts(&mut starts, origin, 9).await;
    assert_eq!(started, secs(&[0, 1, 3, 7, 15, 31, 63, 123, 183]));

    shutdown.cancel();
    let result = supervised.await.expect("joined");
    assert!(result.is_ok(), "failures are not fatal: {result:?}");
}

#[tokio::test(start_paused = true)]
async fn a_restart_waits_one_second_again_after_a_run_that_lasted() {
    let (mut supervisor, mut starts) = supervise_script(vec![
        Run::Fail,
        Run::Fail,
        Run::FailAfter(HEALTHY_RUN),
        Run::Fail,
    ]);
    let shutdown = CancellationToken::new();
    let origin = Instant::now();
    let supervised = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { supervisor.run(&shutdown).await }
    });

    let started = next_starts(&mut starts, origin, 5).await;
    let healthy = HEALTHY_RUN.as_secs();
    // 1 s, 2 s, then the long run and 1 s (not 4 s), then 2 s.
    assert_eq!(
        started,
        secs(&[0, 1, 3, 3 + healthy + 1, 3 + healthy + 1 + 2])
    );

    shutdown.cancel();
    supervised.await.expect("joined").expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_the_restart_delay_ends_the_task_without_another_run() {
    let (mut supervisor, mut starts) = supervise_script(vec![Run::Fail]);
    let shutdown = CancellationToken::new();
    let supervised = tokio::spawn({
        let shutdown = shutdown.clone();
        async move { supervisor.run(&shutdown).await }
    });
    starts.recv().await.expect("first run");

    // Half-way through the one-second delay.
    tokio::time::advance(FIRST_RESTART_DELAY / 2).await;
    shutdown.cancel();
    supervised.await.expect("joined").expect("no panic");
    assert!(
        starts.try_recv().is_err(),
        "no run starts once the daemon is stopping"
    );
}

#[tokio::test]
async fn a_panicking_task_stops_the_other_tasks_and_the_supervisor_returns_the_panic() {
    let mut supervisor = Supervisor::default();
    let (stopped, mut stops) = mpsc::unbounded_channel();
    supervisor.add("steady", move |shutdown: CancellationToken| {
        let stopped = stopped.clone();
        async move {
            shutdown.cancelled().await;
            stopped.send("steady")?;
            Ok(())
        }
    });
    supervisor.add("doomed", |_| async {
        panic!("an invariant broke");
    });
    let shutdown = CancellationToken::new();

    let result = supervisor.run(&shutdown).await;

    let error = format!("{:#}", result.expect_err("a panic is fatal"));
    assert!(error.contains("doomed"), "{error}");
    assert!(error.contains("an invariant broke"), "{error}");
    assert!(
        shutdown.is_cancelled(),
        "the panic cancels the shutdown token"
    );
    assert_eq!(
        stops.try_recv().ok(),
        Some("steady"),
        "the other task stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_task_makes_run_until_stopped_fail_promptly_and_ingest_stop_accepting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = common::test_settings(dir.path());
    let mut application = Application::build(settings.clone()).await.expect("build");
    let ingest = application.ingest_addr();
    let panic_now = Arc::new(Notify::new());
    let trigger = panic_now.clone();
    application.supervise("doomed", move |_| {
        let trigger = trigger.clone();
        async move {
            trigger.notified().await;
            panic!("an invariant broke");
        }
    });
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(application.run_until_stopped(shutdown.clone()));
    let http = reqwest::Client::new();
    let url = format!("http://{ingest}{}", settings.ingest.path);
    let post = |id: &str| {
        let body = consent_event(id, "+15550001111", true);
        let format = outreach_sync::signature::SignatureFormat::from(&settings.webhook);
        let key =
            outreach_sync::signature::Key::for_scheme(format.scheme, common::SECRET).expect("key");
        let headers = outreach_sync::signature::sign(
            &format,
            &key,
            body.as_bytes(),
            chrono::Utc::now().timestamp(),
            None,
        );
        let mut request = http.post(&url).body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let before = post("evt_before").await.expect("ingest answers");
    assert_eq!(before.status(), 200, "ingest accepts before the panic");

    panic_now.notify_one();
    // Well under the 8 s stop limit: the stop is the orderly one, not the give-up.
    let result = tokio::time::timeout(Duration::from_secs(5), daemon)
        .await
        .expect("the daemon stops promptly after a panic")
        .expect("joined");

    let error = format!(
        "{:#}",
        result.expect_err("a panic is an error of the daemon")
    );
    assert!(error.contains("doomed"), "{error}");
    assert!(
        shutdown.is_cancelled(),
        "the panic cancelled the shutdown token"
    );
    assert!(
        tokio::net::TcpStream::connect(ingest).await.is_err(),
        "the ingest listener no longer accepts connections"
    );
    assert!(
        post("evt_after").await.is_err(),
        "no delivery is acknowledged"
    );
}

#[tokio::test]
async fn serve_exits_1_when_a_task_panics() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = [
        (
            "OUTREACH_SYNC__INGEST__BIND".to_string(),
            "127.0.0.1:0".to_string(),
        ),
        (
            "OUTREACH_SYNC__ADMIN__BIND".to_string(),
            "127.0.0.1:0".to_string(),
        ),
        // The test hook of `serve`: one more task, which panics at once.
        ("OUTREACH_SYNC_TEST_PANIC".to_string(), "1".to_string()),
    ];
    let log = dir.path().join("serve.log");
    let mut command: tokio::process::Command =
        daemon_process::command(dir.path(), &["serve"], &env).into();
    let file = std::fs::File::create(&log).expect("log file");
    command
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .kill_on_drop(true);
    let mut child = command.spawn().expect("serve starts");

    // Generous: a loaded machine is slow to start a debug build; a hang is what fails.
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;

    let logs = std::fs::read_to_string(&log).unwrap_or_default();
    let status = status
        .unwrap_or_else(|_| panic!("serve still runs 30 s after the panic: {logs}"))
        .expect("wait");
    // 1 is a runtime failure reported by `serve`; a panic escaping to `main` would be 101.
    assert_eq!(status.code(), Some(1), "{logs}");
    assert!(
        logs.contains("the test-panic task ended abnormally"),
        "{logs}"
    );
    assert!(
        logs.contains("ingest listener stopped"),
        "stopped in order: {logs}"
    );
}
