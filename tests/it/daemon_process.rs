//! The daemon as a child process: `outreach-sync serve` from the built binary on loopback
//! ports, configured through the environment, and signed load from client tasks. For the
//! tests of signals, crashes, full disks and logs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use outreach_sync::settings::WebhookSettings;
use outreach_sync::signature::{Key, SignatureFormat, sign};
use outreach_sync::store::Pool;
use tokio_util::sync::CancellationToken;

use crate::common::{pace, within};

pub const BIN: &str = env!("CARGO_BIN_EXE_outreach-sync");
/// The webhook signing secret every daemon here is started with.
pub const SECRET: &str = "process-test-secret-4711";
/// Longest wait for a started daemon to answer `/readyz`.
const READY_WITHIN: Duration = Duration::from_secs(20);
/// Attempts to start on fresh ports (another process may take a port between the pick and
/// the daemon's bind).
const START_ATTEMPTS: usize = 3;

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The database URL of a daemon whose files live in `dir`.
pub fn database_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("outreach-sync.db").display())
}

/// The configuration file a test may write in `dir` before starting a daemon there: when it
/// exists, [`command`] passes it, and the webhook secrets come from it instead of
/// [`SECRET`].
pub fn config_file(dir: &Path) -> PathBuf {
    dir.join("config.toml")
}

/// `outreach-sync ARGS` with a configuration made only of an empty file in `dir` (or the
/// test's own, see [`config_file`]), the inherited `OUTREACH_SYNC__*` variables removed,
/// the database in `dir` and [`SECRET`]; `env` is applied last.
pub fn command(dir: &Path, args: &[&str], env: &[(String, String)]) -> Command {
    configured(Command::new(BIN), dir, args, env)
}

/// As [`command`], run with at most `open_files` descriptors (`ulimit -n`, soft and hard).
pub fn command_with_open_files(
    open_files: u64,
    dir: &Path,
    args: &[&str],
    env: &[(String, String)],
) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(r#"ulimit -n "$0" && exec "$@""#)
        .arg(open_files.to_string())
        .arg(BIN);
    configured(command, dir, args, env)
}

/// `command` (the binary, or a wrapper that runs it with the arguments that follow) with
/// [`command`]'s configuration.
fn configured(
    mut command: Command,
    dir: &Path,
    args: &[&str],
    env: &[(String, String)],
) -> Command {
    let written = config_file(dir);
    let own_config = written.exists();
    let config = if own_config {
        written
    } else {
        dir.join("empty-config.toml")
    };
    if !config.exists() {
        std::fs::write(&config, "").expect("config file");
    }
    command.arg("--config").arg(&config).args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("OUTREACH_SYNC__")
            || [
                "NOTIFY_SOCKET",
                "WATCHDOG_USEC",
                "WATCHDOG_PID",
                "CREDENTIALS_DIRECTORY",
            ]
            .contains(&name.as_str())
        {
            command.env_remove(name);
        }
    }
    if !own_config {
        command.env("OUTREACH_SYNC__WEBHOOK__SECRETS", SECRET);
    }
    command
        .env("OUTREACH_SYNC__DATABASE__URL", database_url(dir))
        .env("OUTREACH_SYNC__RECONCILE__ON_START", "false")
        .env("OUTREACH_SYNC__RECONCILE__SCHEDULE", "");
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// A running `serve` child. Dropping it kills it.
pub struct Daemon {
    child: Child,
    pub ingest: SocketAddr,
    pub admin: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Daemon {
    /// Starts `serve` with its files in `dir` (logs named after `label`) and waits until
    /// `/readyz` answers 200.
    pub async fn start(dir: &Path, label: &str, env: &[(String, String)]) -> Daemon {
        Self::start_with(dir, label, env, None).await
    }

    /// As [`Daemon::start`], with at most `open_files` descriptors when given.
    pub async fn start_with(
        dir: &Path,
        label: &str,
        env: &[(String, String)],
        open_files: Option<u64>,
    ) -> Daemon {
        let http = reqwest::Client::new();
        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            let ingest = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let stdout = dir.join(format!("{label}-{attempt}.stdout"));
            let stderr = dir.join(format!("{label}-{attempt}.stderr"));
            let mut env = env.to_vec();
            env.push(("OUTREACH_SYNC__INGEST__BIND".into(), ingest.to_string()));
            env.push(("OUTREACH_SYNC__ADMIN__BIND".into(), admin.to_string()));
            let mut command = match open_files {
                Some(limit) => command_with_open_files(limit, dir, &["serve"], &env),
                None => command(dir, &["serve"], &env),
            };
            let child = command
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&stdout).expect("stdout file"))
                .stderr(std::fs::File::create(&stderr).expect("stderr file"))
                .spawn()
                .expect("spawn serve");
            let mut daemon = Daemon {
                child,
                ingest,
                admin,
                stdout,
                stderr,
            };
            if daemon.wait_ready(&http).await {
                return daemon;
            }
            daemon.kill();
            failures.push(daemon.logs());
        }
        panic!("serve did not become ready: {failures:#?}");
    }

    /// Whether the daemon answers `/readyz` within [`READY_WITHIN`] (not when it exited).
    async fn wait_ready(&mut self, http: &reqwest::Client) -> bool {
        let url = self.url("/readyz");
        let ready = within(READY_WITHIN, async || {
            if self.child.try_wait().expect("try_wait").is_some() {
                return Some(false);
            }
            let ready = http.get(&url).timeout(Duration::from_secs(2)).send().await;
            ready.is_ok_and(|r| r.status() == 200).then_some(true)
        })
        .await;
        ready == Some(true)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.ingest, path)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`) to the daemon.
    #[allow(unsafe_code)]
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let sent = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(sent, 0, "kill({}, {signal})", self.pid());
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The exit status, if the daemon exits within `limit` (polled, see [`within`]).
    pub async fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        within(limit, async || self.child.try_wait().expect("try_wait")).await
    }

    /// Everything the daemon wrote to stdout and stderr so far.
    /// The first destination `GET /v1/destinations` lists, asked with the admin `token`.
    pub async fn first_destination(&self, token: &str) -> serde_json::Value {
        let list: serde_json::Value = reqwest::Client::new()
            .get(self.admin_url("/v1/destinations"))
            .bearer_auth(token)
            .send()
            .await
            .expect("admin")
            .json()
            .await
            .expect("json");
        list["items"][0].clone()
    }

    pub fn logs(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!(
            "--- stdout\n{}--- stderr\n{}",
            read(&self.stdout),
            read(&self.stderr)
        )
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// Signs bodies the way the daemon's default `hmac` scheme expects, with [`SECRET`].
pub struct Signer {
    format: SignatureFormat,
    key: Key,
}

impl Signer {
    pub fn new(secret: &str) -> Self {
        let format = SignatureFormat::from(&WebhookSettings::default());
        let key = Key::for_scheme(format.scheme, secret).expect("key");
        Self { format, key }
    }

    pub fn headers(&self, body: &[u8]) -> Vec<(String, String)> {
        sign(
            &self.format,
            &self.key,
            body,
            chrono::Utc::now().timestamp(),
            None,
        )
    }
}

/// The consent event number `n`: its own id, one of `phones` numbers, an event time that
/// grows with `n`.
pub fn numbered_consent_event(n: u64, phones: u64) -> (String, String) {
    let id = format!("evt_{n}");
    let at = chrono::DateTime::from_timestamp(1_790_000_000 + i64::try_from(n).unwrap_or(0), 0)
        .expect("time")
        .to_rfc3339();
    let body = serde_json::json!({
        "type": "consentUpdate-v1",
        "id": id,
        "createdAt": at,
        "data": {
            "organizationId": "org_1",
            "phoneNumber": format!("+1555{:07}", n % phones),
            "globalOptedOut": !n.is_multiple_of(3),
        }
    })
    .to_string();
    (format!("event:{id}"), body)
}

/// Limits of a [`Load`].
#[derive(Debug, Clone, Copy)]
pub struct LoadPlan {
    pub clients: usize,
    /// Distinct numbers the consent events are spread over.
    pub phones: u64,
    /// Events each client sends at most.
    pub events_per_client: u64,
    /// Attempts per event (the same event again after a failure, as the service retries).
    pub attempts_per_event: u32,
    /// The load stops by itself after this long.
    pub max_duration: Duration,
}

/// Signed consent deliveries from several client tasks to whichever daemons are current
/// (spread over them), recording each delivery that got a 2xx.
pub struct Load {
    targets: RwLock<Vec<String>>,
    next: AtomicU64,
    acked: Mutex<Vec<String>>,
    statuses: Mutex<BTreeMap<u16, u64>>,
    transport_errors: AtomicU64,
    stop: CancellationToken,
}

impl Load {
    /// Starts `plan.clients` tasks posting to `target` (a full URL; `None`: wait for one).
    pub fn start(
        plan: LoadPlan,
        target: Option<String>,
    ) -> (Arc<Load>, Vec<tokio::task::JoinHandle<()>>) {
        let load = Arc::new(Load {
            targets: RwLock::new(target.into_iter().collect()),
            next: AtomicU64::new(0),
            acked: Mutex::new(Vec::new()),
            statuses: Mutex::new(BTreeMap::new()),
            transport_errors: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        let tasks = (0..plan.clients)
            .map(|_| tokio::spawn(load.clone().client(plan)))
            .collect();
        (load, tasks)
    }

    pub fn set_target(&self, target: Option<String>) {
        self.set_targets(target.into_iter().collect());
    }

    /// Ingest URLs the deliveries are spread over (each next attempt goes to the next one).
    pub fn set_targets(&self, targets: Vec<String>) {
        *self.targets.write().expect("targets") = targets;
    }

    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Dedup keys of the deliveries answered 2xx.
    pub fn acked(&self) -> Vec<String> {
        self.acked.lock().expect("acked").clone()
    }

    pub fn acked_count(&self) -> usize {
        self.acked.lock().expect("acked").len()
    }

    /// How many responses had each status.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        self.statuses.lock().expect("statuses").clone()
    }

    pub fn transport_errors(&self) -> u64 {
        self.transport_errors.load(Ordering::Relaxed)
    }

    async fn client(self: Arc<Self>, plan: LoadPlan) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(1))
            .build()
            .expect("client");
        let signer = Signer::new(SECRET);
        let started = Instant::now();
        for _ in 0..plan.events_per_client {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let (key, body) = numbered_consent_event(n, plan.phones);
            for attempt in 0..plan.attempts_per_event {
                if self.stop.is_cancelled() || started.elapsed() > plan.max_duration {
                    return;
                }
                let target = {
                    let targets = self.targets.read().expect("targets");
                    let spread = usize::try_from(n)
                        .unwrap_or(0)
                        .wrapping_add(attempt as usize);
                    (!targets.is_empty()).then(|| targets[spread % targets.len()].clone())
                };
                let answered = match target {
                    // No daemon right now (restarting).
                    None => false,
                    Some(url) => {
                        let mut request = http.post(url).body(body.clone());
                        for (name, value) in signer.headers(body.as_bytes()) {
                            request = request.header(name, value);
                        }
                        match request.send().await {
                            Ok(response) => {
                                let status = response.status();
                                *self
                                    .statuses
                                    .lock()
                                    .expect("statuses")
                                    .entry(status.as_u16())
                                    .or_default() += 1;
                                if status.is_success() {
                                    self.acked.lock().expect("acked").push(key.clone());
                                    break;
                                }
                                true
                            }
                            Err(_) => {
                                self.transport_errors.fetch_add(1, Ordering::Relaxed);
                                false
                            }
                        }
                    }
                };
                if !answered {
                    // No daemon, or none that answers (killed, starting): try again shortly,
                    // as a sender with a retry policy would.
                    pace(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

/// Keys of `keys` that are not rows of the outbox, on either backend.
pub async fn missing_from_outbox(pool: impl Into<Pool>, keys: &[String]) -> Vec<String> {
    const KEYS: &str = "SELECT dedup_key FROM outbox";
    let stored = match pool.into() {
        Pool::Sqlite(pool) => sqlx::query_scalar::<_, String>(KEYS).fetch_all(&pool).await,
        Pool::Postgres(pool) => sqlx::query_scalar::<_, String>(KEYS).fetch_all(&pool).await,
    };
    let stored: std::collections::HashSet<String> =
        stored.expect("outbox keys").into_iter().collect();
    keys.iter()
        .filter(|k| !stored.contains(*k))
        .cloned()
        .collect()
}

/// The one number `sql` (a `SELECT COUNT(*) ...`) reads from `pool`.
pub async fn count(pool: &sqlx::SqlitePool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(pool)
        .await
        .expect(sql)
}

/// A read connection to the database in `dir`, opened after the daemon is gone.
pub async fn open_database(dir: &Path) -> sqlx::SqlitePool {
    sqlx::SqlitePool::connect(&database_url(dir))
        .await
        .expect("open the database")
}
