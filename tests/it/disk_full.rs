//! A full disk under the real process: the database on a small tmpfs filled to the last
//! byte. Ingest refuses with 503 (never a 2xx it cannot keep) and recovers by itself once
//! there is room again. Needs `mount` (root with CAP_SYS_ADMIN): skipped with a notice
//! where mounting is not permitted.

use crate::common::within;
use crate::daemon_process;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use daemon_process::{Daemon, SECRET, Signer, missing_from_outbox};

/// Size of the filesystem the database lives on.
const TMPFS_SIZE: &str = "4m";
/// Padding of each delivery, so that a few of them need more room than a full disk has.
const PADDING: usize = 96 * 1024;
/// Deliveries sent while the disk is full; together they fit in the filesystem once it
/// has room again.
const WHILE_FULL: usize = 12;

/// A tmpfs mounted for the test; unmounted (lazily) when dropped.
struct SmallFilesystem {
    path: PathBuf,
}

impl SmallFilesystem {
    fn mount(path: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={TMPFS_SIZE},mode=0700"))
            .arg("outreach-sync-test")
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_string());
        }
        Ok(Self {
            path: path.to_owned(),
        })
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Writes `path` until the filesystem has no room left; returns the bytes written.
fn fill(path: &Path) -> u64 {
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![0xA5u8; 16 * 1024];
    let mut written = 0u64;
    // Bounded by the filesystem's size: a tmpfs of 4 MiB takes at most 256 chunks.
    for _ in 0..100_000 {
        match file.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    let _ = file.sync_all();
    written
}

fn padded_event(n: usize) -> (String, String) {
    let id = format!("evt_full_{n}");
    let body = serde_json::json!({
        "type": "consentUpdate-v1",
        "id": id,
        "createdAt": "2026-11-21T10:00:00Z",
        "data": {"organizationId": "org_1", "phoneNumber": format!("+1555{n:07}"), "globalOptedOut": true},
        "padding": "x".repeat(PADDING),
    })
    .to_string();
    (format!("event:{id}"), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_never_an_unkept_2xx_and_recovers_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let mount_point = dir.path().join("small");
    let small = match SmallFilesystem::mount(&mount_point) {
        Ok(small) => small,
        Err(reason) => {
            println!("NOTICE: skipped: cannot mount a tmpfs here ({reason})");
            return;
        }
    };
    let database = format!("sqlite://{}", small.path.join("outreach-sync.db").display());
    let env = [("OUTREACH_SYNC__DATABASE__URL".to_string(), database.clone())];
    let mut daemon = Daemon::start(dir.path(), "serve", &env).await;
    let http = reqwest::Client::new();
    let signer = Signer::new(SECRET);
    let post = |body: String| {
        let request = signer
            .headers(body.as_bytes())
            .into_iter()
            .fold(http.post(daemon.url("/webhooks")), |r, (n, v)| {
                r.header(n, v)
            })
            .body(body);
        async move { request.send().await.expect("request") }
    };
    let mut acked = Vec::new();
    let (key, body) = padded_event(0);
    assert_eq!(post(body).await.status(), 200, "{}", daemon.logs());
    acked.push(key);

    let filled = fill(&small.path.join("filler"));
    let mut refused = Vec::new();
    let mut retry_after = None;
    for n in 1..=WHILE_FULL {
        let (key, body) = padded_event(n);
        let response = post(body.clone()).await;
        match response.status().as_u16() {
            200 => acked.push(key),
            503 => {
                retry_after = response.headers().get("retry-after").cloned();
                refused.push(body);
            }
            other => panic!("{other} while the disk is full: {}", daemon.logs()),
        }
    }
    println!(
        "filled {filled} bytes; while full: {} acknowledged, {} refused with 503",
        acked.len() - 1,
        refused.len()
    );
    assert!(
        !refused.is_empty(),
        "a full disk refuses deliveries: {}",
        daemon.logs()
    );
    assert!(retry_after.is_some(), "503 carries Retry-After");
    assert!(
        daemon.logs().contains("outbox commit failed"),
        "{}",
        daemon.logs()
    );

    std::fs::remove_file(small.path.join("filler")).unwrap();
    let recovered_at = Instant::now();
    // The refused deliveries, sent again as the service would, until the daemon takes one.
    let recovered = within(Duration::from_secs(10), async || {
        let body = refused.first().cloned().expect("a refused delivery");
        post(body).await.status() == 200
    })
    .await;
    assert!(
        recovered.is_some(),
        "ingest recovers by itself: {}",
        daemon.logs()
    );
    println!(
        "recovered {} ms after the disk had room again",
        recovered_at.elapsed().as_millis()
    );
    for body in &refused {
        let response = post(body.clone()).await;
        assert_eq!(response.status(), 200, "{}", daemon.logs());
        let key = format!(
            "event:{}",
            serde_json::from_str::<serde_json::Value>(body).unwrap()["id"]
                .as_str()
                .unwrap()
        );
        acked.push(key);
    }
    let ready = http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    daemon.signal(libc::SIGTERM);
    let status = daemon
        .exit_within(Duration::from_secs(10))
        .await
        .expect("exits");
    assert!(status.success(), "{status}: {}", daemon.logs());
    let pool = sqlx::SqlitePool::connect(&database).await.unwrap();
    let missing = missing_from_outbox(&pool, &acked).await;
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(integrity, "ok");
    pool.close().await;
}
