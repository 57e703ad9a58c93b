//! The container image: the top-level `Containerfile` built with podman around the release
//! binary, then run as an operator runs it, with a volume, secrets as files and the host's
//! network (`--network host`, which is also how `demo`'s console is reached from the host).
//!
//! These tests need podman, the base image `debian:bookworm-slim` in its local storage and
//! the release binary the Containerfile copies (`cargo build --release`, into
//! target/release/). `.ci/container` provides all three and runs them; they are ignored in
//! the suite's own run, which builds no release binary. Without podman they say so on the
//! terminal and pass without running, unless `OUTREACH_SYNC_TEST_PODMAN` is set or `CI` is
//! `true`: then a missing podman fails them.

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use crate::common::{consent_event, eventually};
use crate::daemon_process::{Signer, free_port};

const REQUIRED_VARIABLE: &str = "OUTREACH_SYNC_TEST_PODMAN";
/// The image the tests build (and build again on each run: the tag moves to the new one).
const IMAGE: &str = "localhost/outreach-sync-test:latest";
/// The uid the image runs as (Containerfile's USER).
const UID: &str = "10001";
/// The secrets given to `serve`, as files; none of them may show in a log or an inspection.
const WEBHOOK_SECRET: &str = "container-webhook-secret-5b1e";
const ADMIN_TOKEN: &str = "container-admin-token-77c2";
const CLIENT_SECRET: &str = "container-client-secret-0d9a";
/// How long `podman stop` and `podman restart` give the daemon before SIGKILL.
const GRACE_SECS: u64 = 15;
const READY_WITHIN: Duration = Duration::from_secs(60);
const LEADS: &str = "200";

/// Whether podman is installed; when it is not, said once on the terminal, or a failure
/// where it is required.
fn podman_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        let found = std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join("podman").is_file())
        });
        let required = std::env::var_os(REQUIRED_VARIABLE).is_some()
            || std::env::var("CI").is_ok_and(|ci| ci == "true");
        if !found && required {
            panic!("{REQUIRED_VARIABLE} or CI=true is set but podman is not on the PATH");
        }
        if !found {
            eprintln!(
                "\nContainer tests SKIPPED: podman is not on the PATH (apt-get install podman; \
                 .ci/container sets it up and runs them).\n"
            );
        }
        found
    })
}

/// `podman ARGS`, run to its end.
fn podman(args: &[&str]) -> Output {
    std::process::Command::new("podman")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("podman runs")
}

/// `podman ARGS`, which must succeed; its stdout.
fn podman_ok(args: &[&str]) -> String {
    let output = podman(args);
    assert!(
        output.status.success(),
        "podman {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Builds [`IMAGE`] from the Containerfile, unchanged, once per run of the suite.
fn image() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let top = crate::repository("");
        let binary = top.join("target/release/outreach-sync");
        assert!(
            binary.is_file(),
            "{} is missing: the Containerfile copies the release binary \
             (cargo build --release -p outreach-sync-cli)",
            binary.display()
        );
        // `docker` format: the OCI one has no field for the HEALTHCHECK. Never pulls: the
        // base image is local (.ci/container-base).
        let top = top.to_str().expect("a UTF-8 path");
        let file = format!("{top}/Containerfile");
        podman_ok(&[
            "build",
            "--pull=never",
            "--format=docker",
            "--quiet",
            "--tag",
            IMAGE,
            "--file",
            &file,
            top,
        ]);
    });
    IMAGE
}

/// Names made for one test, removed with it (containers, volume, secrets).
struct Resources {
    prefix: String,
    containers: Vec<String>,
    volumes: Vec<String>,
    secrets: Vec<String>,
}

impl Resources {
    fn new(test: &str) -> Self {
        Self {
            prefix: format!("outreach-sync-test-{test}-{}", std::process::id()),
            containers: Vec::new(),
            volumes: Vec::new(),
            secrets: Vec::new(),
        }
    }

    fn container(&mut self, name: &str) -> String {
        let name = format!("{}-{name}", self.prefix);
        self.containers.push(name.clone());
        name
    }

    fn volume(&mut self) -> String {
        let name = format!("{}-data", self.prefix);
        podman_ok(&["volume", "create", &name]);
        self.volumes.push(name.clone());
        name
    }

    /// A podman secret holding `text` (from a file: never on a command line).
    fn secret(&mut self, name: &str, text: &str, dir: &Path) -> String {
        let file = dir.join(name);
        std::fs::write(&file, text).expect("secret file");
        let secret = format!("{}-{name}", self.prefix);
        podman_ok(&[
            "secret",
            "create",
            &secret,
            file.to_str().expect("a UTF-8 path"),
        ]);
        self.secrets.push(secret.clone());
        secret
    }
}

impl Drop for Resources {
    fn drop(&mut self) {
        for container in &self.containers {
            let _ = podman(&["rm", "--force", "--volumes", "--time", "0", container]);
        }
        for volume in &self.volumes {
            let _ = podman(&["volume", "rm", "--force", volume]);
        }
        for secret in &self.secrets {
            let _ = podman(&["secret", "rm", secret]);
        }
    }
}

/// A `serve` container's listeners on the host's loopback, with its secrets and volume.
struct Serve {
    ingest: String,
    admin: String,
    secrets: Vec<String>,
    volume: String,
}

impl Serve {
    /// `podman run -d` of the image's default command, `serve`, named `name`.
    fn run(&self, name: &str) {
        let mut args = vec![
            "run".to_owned(),
            "--detach".into(),
            format!("--name={name}"),
            "--network=host".into(),
            format!("--volume={}:/var/lib/outreach-sync", self.volume),
            // No systemd timer to run the health check on this machine: the test runs it.
            "--health-interval=disable".into(),
        ];
        for (secret, target) in self.secrets.iter().zip(SECRET_FILES) {
            args.push(format!(
                "--secret={secret},type=mount,target={target},uid={UID},gid={UID},mode=0400"
            ));
        }
        for (key, value) in [
            ("INGEST__BIND", self.ingest.as_str()),
            ("ADMIN__BIND", self.admin.as_str()),
            // Nothing to reconcile against: the service's address is the example's.
            ("RECONCILE__ON_START", "false"),
            ("RECONCILE__SCHEDULE", ""),
        ] {
            args.push(format!("--env=OUTREACH_SYNC__{key}={value}"));
        }
        args.push(image().to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        podman_ok(&args);
    }

    async fn wait_ready(&self, http: &reqwest::Client, name: &str) {
        let url = format!("http://{}/readyz", self.ingest);
        let ready = crate::common::within(READY_WITHIN, async || {
            let answer = http.get(&url).timeout(Duration::from_secs(2)).send().await;
            answer.is_ok_and(|a| a.status() == 200)
        })
        .await;
        if ready.is_none() {
            panic!("{name} did not answer /readyz: {}", logs(name));
        }
    }

    /// POSTs the signed delivery; the daemon's answer (`status`, `id`).
    async fn deliver(&self, http: &reqwest::Client, body: &str) -> Value {
        let mut request = http
            .post(format!("http://{}/webhooks", self.ingest))
            .body(body.to_owned());
        for (name, value) in Signer::new(WEBHOOK_SECRET).headers(body.as_bytes()) {
            request = request.header(name, value);
        }
        let answer = request.send().await.expect("POST /webhooks");
        assert_eq!(answer.status(), 200, "the delivery is acknowledged");
        answer.json().await.expect("a JSON answer")
    }

    /// The number's consent records, through the admin API with the admin token.
    async fn consent(&self, http: &reqwest::Client, phone: &str) -> Value {
        http.get(format!("http://{}/v1/consent", self.admin))
            .query(&[("phoneNumber", phone)])
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("GET /v1/consent")
            .json()
            .await
            .expect("a JSON answer")
    }
}

/// Where the image's configuration reads each secret (`/run/secrets/...`).
const SECRET_FILES: [&str; 3] = ["webhook-secrets", "admin-tokens", "client-secret"];

fn logs(container: &str) -> String {
    let output = podman(&["logs", container]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn inspect(what: &str, format: &str) -> String {
    podman_ok(&["inspect", "--format", format, what])
        .trim()
        .to_owned()
}

#[tokio::test]
#[ignore = "needs podman, its base image and the release binary: .ci/container runs it"]
async fn the_image_serves_as_a_non_root_pid_1_keeps_deliveries_on_its_volume_and_stops_cleanly() {
    if !podman_present() {
        return;
    }
    let mut resources = Resources::new("serve");
    let files = tempfile::tempdir().expect("temp dir");
    let secrets = [
        format!("{WEBHOOK_SECRET}\n"),
        format!("ops:{ADMIN_TOKEN}\n"),
        format!("{CLIENT_SECRET}\n"),
    ]
    .iter()
    .zip(SECRET_FILES)
    .map(|(text, name)| resources.secret(name, text, files.path()))
    .collect();
    let serve = Serve {
        ingest: format!("127.0.0.1:{}", free_port()),
        admin: format!("127.0.0.1:{}", free_port()),
        secrets,
        volume: resources.volume(),
    };
    let http = reqwest::Client::new();
    let first = resources.container("first");
    serve.run(&first);
    serve.wait_ready(&http, &first).await;

    // The daemon is PID 1 (so SIGTERM reaches it), as the image's user, not root.
    let status = podman_ok(&["exec", &first, "cat", "/proc/1/status"]);
    let uids = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("Uid:");
    assert_eq!(
        uids.split_whitespace().skip(1).collect::<Vec<_>>(),
        [UID; 4],
        "{uids}"
    );
    let command = podman_ok(&["exec", &first, "cat", "/proc/1/cmdline"]);
    assert_eq!(command, "/usr/bin/outreach-sync\0serve\0");
    // The image's HEALTHCHECK asks /healthz of the listener the environment moved.
    let health = podman(&["healthcheck", "run", &first]);
    assert!(health.status.success(), "healthy: {health:?}");

    let phone = "+15550001234";
    let body = consent_event("evt_container_1", phone, true);
    let accepted = serve.deliver(&http, &body).await;
    assert_eq!(accepted["status"], "accepted");
    let opted_out = async |serve: &Serve| {
        eventually(
            "the opt-out in the ledger",
            Duration::from_secs(20),
            async || {
                let consent = serve.consent(&http, phone).await;
                consent["items"][0]["optedOut"].as_bool()
            },
        )
        .await
    };
    assert!(opted_out(&serve).await);

    // Restarted, it knows the delivery: the same one again is a duplicate.
    podman_ok(&["restart", "--time", &GRACE_SECS.to_string(), &first]);
    serve.wait_ready(&http, &first).await;
    let again = serve.deliver(&http, &body).await;
    assert_eq!(again["status"], "duplicate");
    assert_eq!(again["id"], accepted["id"]);

    // `podman stop`: SIGTERM, and a clean exit well within the grace period.
    let started = Instant::now();
    podman_ok(&["stop", "--time", &GRACE_SECS.to_string(), &first]);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(GRACE_SECS),
        "stopped in {took:?}"
    );
    assert_eq!(
        inspect(&first, "{{.State.ExitCode}}"),
        "0",
        "{}",
        logs(&first)
    );
    let said = logs(&first);
    for line in [
        "stop requested; finishing in-flight work",
        "ingest listener stopped",
        "worker stopped",
    ] {
        assert_eq!(
            said.matches(line).count(),
            2,
            "`{line}` once per stop (the restart's and this one): {said}"
        );
    }

    // A new container on the same volume (an upgrade) has the ledger and the outbox.
    let database = Path::new(&inspect(&serve.volume, "{{.Mountpoint}}")).join("outreach-sync.db");
    assert!(database.is_file(), "{} on the volume", database.display());
    let second = resources.container("second");
    serve.run(&second);
    serve.wait_ready(&http, &second).await;
    assert!(opted_out(&serve).await);
    assert_eq!(serve.deliver(&http, &body).await["status"], "duplicate");
    podman_ok(&["stop", "--time", &GRACE_SECS.to_string(), &second]);

    // The secrets were files: no log, no inspection of the container or image shows one.
    let shown = [
        logs(&first),
        logs(&second),
        podman_ok(&["inspect", &first]),
        podman_ok(&["image", "inspect", image()]),
    ]
    .concat();
    for secret in [WEBHOOK_SECRET, ADMIN_TOKEN, CLIENT_SECRET] {
        assert!(!shown.contains(secret), "a secret shows");
    }
}

#[tokio::test]
#[ignore = "needs podman, its base image and the release binary: .ci/container runs it"]
async fn the_demo_runs_inside_the_image_with_its_console_reached_from_the_host() {
    if !podman_present() {
        return;
    }
    let mut resources = Resources::new("demo");
    let name = resources.container("demo");
    let mut demo = tokio::process::Command::new("podman")
        .args(["run", "--name", &name, "--network=host", "--no-healthcheck"])
        .args([image(), "demo", "--duration", "15", "--leads", LEADS])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("podman run");
    let stdout = demo.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut said = Vec::new();
    let (mut console, mut token) = (None, None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while console.is_none() || token.is_none() {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .expect("the demo prints its console's address and token in time")
            .expect("read")
            .unwrap_or_else(|| panic!("the demo ended early: {said:#?}"));
        let word_after = |marker: &str| {
            line.split_once(marker)
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .map(|w| w.trim_end_matches(')').to_owned())
        };
        if line.trim_start().starts_with("console:") {
            console = word_after("console:");
        }
        if line.contains("admin API") {
            token = word_after("(token ");
        }
        said.push(line);
    }
    let (console, token) = (console.expect("console"), token.expect("token"));

    // From the host: the console's sign-in page, and the admin API with the printed token.
    let http = reqwest::Client::new();
    let page = http.get(&console).send().await.expect("GET the console");
    assert_eq!(page.status(), 200);
    assert!(page.url().path().starts_with("/signin"), "{}", page.url());
    let status = http
        .get(format!("{}v1/status", console))
        .bearer_auth(&token)
        .send()
        .await
        .expect("GET /v1/status");
    assert_eq!(status.status(), 200);

    let rest = tokio::time::timeout(Duration::from_secs(180), async {
        let mut rest = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            rest.push(line);
        }
        rest
    })
    .await
    .expect("the demo ends in time");
    let exit = demo.wait().await.expect("podman run ends");
    said.extend(rest);
    let said = said.join("\n");
    assert!(exit.success(), "{exit}: {said}");
    let last = format!("the mirror now differs from the service for 0 of {LEADS} leads");
    assert!(said.contains(&last), "{said}");
    assert!(
        said.contains("its mirror differs from it for 0 leads"),
        "{said}"
    );
}
