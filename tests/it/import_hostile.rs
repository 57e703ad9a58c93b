//! Imports against what can go wrong around them: a dry run while another writer holds the
//! database, a client that leaves once its list is sent (or before), a list that takes
//! longer to read than the body deadline, more imports at once than the daemon takes.
//! Nothing an admin starts may hold up the daemon's writers, and an import is recorded
//! whole or is visibly not (in its log lines).

use std::time::Duration;

use serde_json::Value;
use sqlx::Connection as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::common::{self, ADMIN_TOKEN, Backend, TestApp, on_both_backends, within};
use crate::console::input_value;
use crate::daemon_process::{self, Daemon};

/// Longest a request of these tests may take before it counts as held up.
const HELD_UP_AFTER: Duration = Duration::from_secs(20);
/// Longest wait for what a child process does in the background.
const BACKGROUND_WITHIN: Duration = Duration::from_secs(120);

/// A list of `count` numbers (`+1555` and 7 digits from `first`), one a line under a
/// `phone` header.
fn list(first: u64, count: u64) -> String {
    let mut text = String::from("phone\n");
    for n in first..first + count {
        text.push_str(&format!("+1555{n:07}\n"));
    }
    text
}

/// `POST /v1/consent/import?{query}` of `body` with the admin token; the status and the
/// JSON answer.
async fn import(
    app: &TestApp,
    query: &str,
    body: String,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = app
        .http
        .post(app.admin_url(&format!("/v1/consent/import?{query}")))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(body)
        .timeout(HELD_UP_AFTER)
        .send()
        .await
        .expect("the import is answered");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.expect("JSON answer"))
}

/// The head of an import request as a client writes it on the wire, for a body of
/// `length` bytes.
fn request_head(
    admin: std::net::SocketAddr,
    token: &str,
    query: &str,
    length: usize,
    expect_continue: bool,
) -> String {
    let expect = if expect_continue {
        "Expect: 100-continue\r\n"
    } else {
        ""
    };
    format!(
        "POST /v1/consent/import?{query} HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {token}\r\nContent-Type: text/csv\r\nContent-Length: {length}\r\n{expect}\r\n"
    )
}

/// Reads from `stream` until a whole response head has arrived; gives it.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(HELD_UP_AFTER, stream.read(&mut byte))
            .await
            .expect("a response head in time")
            .expect("read");
        assert_eq!(
            n, 1,
            "the connection closed before a response head: {head:?}"
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).expect("an ASCII head")
}

/// A console visitor signed in with [`ADMIN_TOKEN`]: its session cookie.
struct Console {
    http: reqwest::Client,
    base: String,
    cookies: String,
}

impl Console {
    async fn sign_in(app: &TestApp) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client");
        let base = format!("http://{}", app.admin_addr);
        let form = http
            .get(format!("{base}/signin"))
            .send()
            .await
            .expect("GET /signin");
        let mut console = Console {
            http,
            base,
            cookies: String::new(),
        };
        console.keep(&form);
        let html = form.text().await.expect("the sign-in page");
        let (csrf, next) = (input_value(&html, "csrf"), input_value(&html, "next"));
        let signed = console
            .http
            .post(format!("{}/signin", console.base))
            .header("cookie", &console.cookies)
            .form(&[
                ("csrf", csrf.as_str()),
                ("token", ADMIN_TOKEN),
                ("next", &next),
            ])
            .send()
            .await
            .expect("POST /signin");
        assert_eq!(signed.status(), 303, "signed in");
        console.keep(&signed);
        console
    }

    fn keep(&mut self, response: &reqwest::Response) {
        for value in response.headers().get_all("set-cookie") {
            let pair = value
                .to_str()
                .expect("ASCII")
                .split(';')
                .next()
                .unwrap_or_default();
            if !pair.ends_with('=') {
                if !self.cookies.is_empty() {
                    self.cookies.push_str("; ");
                }
                self.cookies.push_str(pair);
            }
        }
    }

    /// The Import page's preview of `list` for organization `org_1`: its status and page.
    async fn preview(&self, list: &str) -> (u16, String) {
        let page = self
            .http
            .get(format!("{}/import", self.base))
            .header("cookie", &self.cookies)
            .send()
            .await
            .expect("GET /import");
        let csrf = input_value(&page.text().await.expect("the page"), "csrf");
        let part = reqwest::multipart::Part::text(list.to_owned())
            .file_name("list.csv")
            .mime_str("text/csv")
            .expect("a part");
        let form = reqwest::multipart::Form::new()
            .text("csrf", csrf)
            .part("list", part)
            .text("scope", "organization")
            .text("organizationId", "org_1")
            .text("reason", "old platform");
        let response = self
            .http
            .post(format!("{}/import", self.base))
            .header("cookie", &self.cookies)
            .multipart(form)
            .timeout(HELD_UP_AFTER)
            .send()
            .await
            .expect("POST /import");
        let status = response.status().as_u16();
        (status, response.text().await.expect("a page"))
    }
}

/// Holds what a writer of the database takes, on another connection than the daemon's:
/// SQLite's one write lock (`BEGIN IMMEDIATE`), or on PostgreSQL the number lock of
/// `phone` that the apply path takes before writing it.
enum Writer {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Writer {
    async fn hold(app: &TestApp, backend: Backend, phone: &str) -> Self {
        match backend {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&app.settings.database.url)
                    .await
                    .expect("a connection of its own");
                sqlx::raw_sql("BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .expect("the write lock");
                Writer::Sqlite(conn)
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&app.settings.database.url)
                    .await
                    .expect("a connection of its own");
                // The apply path's lock of a number (`store/postgres/apply.rs`).
                sqlx::query("SELECT pg_advisory_lock(x'6f736e00'::int, hashtext($1))")
                    .bind(phone)
                    .execute(&mut conn)
                    .await
                    .expect("the number's lock");
                Writer::Postgres(conn)
            }
        }
    }

    async fn release(self) {
        match self {
            Writer::Sqlite(mut conn) => {
                sqlx::raw_sql("ROLLBACK")
                    .execute(&mut conn)
                    .await
                    .expect("released");
            }
            Writer::Postgres(mut conn) => {
                sqlx::raw_sql("SELECT pg_advisory_unlock_all()")
                    .execute(&mut conn)
                    .await
                    .expect("released");
            }
        }
    }
}

on_both_backends!(a_dry_run_and_a_console_preview_go_through_while_a_writer_holds_the_database);
async fn a_dry_run_and_a_console_preview_go_through_while_a_writer_holds_the_database(
    backend: Backend,
) {
    let Some(app) = common::spawn_app_on(backend, common::with_admin_token).await else {
        return;
    };
    let console = Console::sign_in(&app).await;
    let listed = list(9000, 3000);
    let writer = Writer::hold(&app, backend, "+15550009001").await;

    // A dry run takes no write lock (and no number's lock): it neither waits for a writer
    // nor makes one wait.
    let (status, _, report) = import(&app, "org=org_1&dryRun=true", listed.clone()).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (&report["recorded"], &report["dryRun"]),
        (&3000.into(), &true.into())
    );
    let (status, page) = console.preview(&listed).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<dd id=\"preview-recorded\">3000</dd>"),
        "{page}"
    );

    writer.release().await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM ledger").await,
        0,
        "nothing recorded"
    );
    app.stop().await;
}

/// `serve` as a child process with an admin token named `ops`, its logs kept.
async fn daemon(dir: &std::path::Path) -> Daemon {
    let env = [(
        "OUTREACH_SYNC__ADMIN__TOKENS".to_owned(),
        format!("ops:{ADMIN_TOKEN}"),
    )];
    Daemon::start(dir, "serve", &env).await
}

async fn ledger_entries(dir: &std::path::Path) -> i64 {
    let pool = daemon_process::open_database(dir).await;
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM ledger")
        .fetch_one(&pool)
        .await
        .expect("count the ledger");
    pool.close().await;
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_whose_client_leaves_before_the_answer_is_recorded_whole_and_logged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon = daemon(dir.path()).await;
    let numbers = 30_000;
    let body = list(0, numbers);

    // The whole request, then the client is gone: nobody is there for the answer.
    let mut stream = TcpStream::connect(daemon.admin).await.expect("connect");
    let head = request_head(
        daemon.admin,
        ADMIN_TOKEN,
        "org=org_1&file=left.csv",
        body.len(),
        false,
    );
    stream.write_all(head.as_bytes()).await.expect("head sent");
    stream.write_all(body.as_bytes()).await.expect("list sent");
    drop(stream);

    let recorded = within(BACKGROUND_WITHIN, async || {
        ledger_entries(dir.path()).await == numbers as i64
    })
    .await;
    assert!(
        recorded.is_some(),
        "every number recorded, not {} of {numbers}: {}",
        ledger_entries(dir.path()).await,
        daemon.logs()
    );
    let logged = within(BACKGROUND_WITHIN, async || {
        daemon.logs().contains("import finished")
    })
    .await;
    let logs = daemon.logs();
    assert!(logged.is_some(), "{logs}");
    let started = logs
        .lines()
        .find(|l| l.contains("import started"))
        .expect("a start line");
    assert!(
        started.contains("ops") && started.contains("left.csv"),
        "{started}"
    );
    let finished = logs
        .lines()
        .find(|l| l.contains("import finished"))
        .expect("an end line");
    assert!(
        finished.contains(&format!("recorded={numbers}")),
        "{finished}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_the_database_fails_part_way_says_how_much_it_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon = daemon(dir.path()).await;
    // The database refuses the ledger's 3,001st entry: the list's second batch of 2,000.
    let pool = daemon_process::open_database(dir.path()).await;
    sqlx::raw_sql(
        "CREATE TRIGGER test_full BEFORE INSERT ON ledger
         WHEN (SELECT COUNT(*) FROM ledger) >= 3000
         BEGIN SELECT RAISE(ABORT, 'no room left (a test)'); END",
    )
    .execute(&pool)
    .await
    .expect("the trigger");
    pool.close().await;

    let response = reqwest::Client::new()
        .post(daemon.admin_url("/v1/consent/import?org=org_1&file=big.csv"))
        .bearer_auth(ADMIN_TOKEN)
        .body(list(0, 5000))
        .timeout(HELD_UP_AFTER)
        .send()
        .await
        .expect("the import is answered");
    assert_eq!(response.status(), 503);
    let answer: Value = response.json().await.expect("JSON");
    let message = answer["message"].as_str().expect("a message");
    assert!(message.contains("after 2000 entries"), "{message}");
    assert!(
        !message.contains("a test"),
        "the database's words stay in the log: {message}"
    );
    assert_eq!(
        ledger_entries(dir.path()).await,
        2000,
        "the first batch is recorded"
    );

    let logs = daemon.logs();
    let aborted = logs
        .lines()
        .find(|l| l.contains("import aborted"))
        .unwrap_or_else(|| panic!("an abort line: {logs}"));
    assert!(aborted.contains("WARN"), "{aborted}");
    assert!(aborted.contains("recorded=2000"), "{aborted}");
    assert!(aborted.contains("sha256="), "{aborted}");
    assert!(aborted.contains("no room left (a test)"), "{aborted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_cut_off_while_it_arrives_records_nothing_and_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon = daemon(dir.path()).await;
    let body = list(0, 20_000);
    let half = body.len() / 2;

    let mut stream = TcpStream::connect(daemon.admin).await.expect("connect");
    let head = request_head(
        daemon.admin,
        ADMIN_TOKEN,
        "org=org_1&file=cut.csv",
        body.len(),
        false,
    );
    stream.write_all(head.as_bytes()).await.expect("head sent");
    stream
        .write_all(&body.as_bytes()[..half])
        .await
        .expect("half the list sent");
    drop(stream);

    let said = within(BACKGROUND_WITHIN, async || {
        daemon
            .logs()
            .contains("import refused: the list did not arrive whole")
    })
    .await;
    let logs = daemon.logs();
    assert!(said.is_some(), "{logs}");
    assert!(!logs.contains("import started"), "{logs}");
    assert_eq!(ledger_entries(dir.path()).await, 0, "nothing recorded");
}

/// A list of `rows` rows of one number, a header first: as long to read as any list of as
/// many rows, and next to nothing to record.
fn one_number(rows: usize) -> String {
    let mut text = String::with_capacity(rows * 13 + 6);
    text.push_str("phone\n");
    for _ in 0..rows {
        text.push_str("+15550000001\n");
    }
    text
}

/// The status line and body of the response that `stream` reads next.
async fn read_response(stream: &mut TcpStream) -> (String, String) {
    let head = read_head(stream).await;
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .expect("a Content-Length")
        .parse()
        .expect("a length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("the body");
    let status = head.lines().next().unwrap_or_default().to_owned();
    (status, String::from_utf8(body).expect("UTF-8"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_takes_longer_to_read_than_the_body_deadline_is_not_cut_by_it() {
    const ROWS: usize = 2_000_000;
    let deadline = 3;
    let app = common::spawn_app(|settings| {
        common::with_admin_token(settings);
        settings.admin.body_timeout_secs = deadline;
    })
    .await;
    // Sent within the deadline, with a second's pause before its last line (a client's
    // hiccup); read (two million numbers normalized) for several seconds in a debug build.
    // Were the list read as it arrives, the client would be held to the reader's pace,
    // and its pause would come after the deadline.
    let body = one_number(ROWS);
    let (most, last) = body.split_at(body.len() - 13);
    // A send buffer of its own size: what waits in it is no more than a moment's reading.
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .set_send_buffer_size(1024 * 1024)
        .expect("a send buffer");
    let mut stream = socket.connect(app.admin_addr).await.expect("connect");
    let head = request_head(
        app.admin_addr,
        ADMIN_TOKEN,
        "org=org_1&dryRun=true",
        body.len(),
        false,
    );
    let sent = std::time::Instant::now();
    let written = async {
        stream.write_all(head.as_bytes()).await?;
        let parts = [most, last].map(str::as_bytes);
        common::trickle(&mut stream, &parts, Duration::from_secs(1)).await
    }
    .await;
    if let Err(error) = written {
        let (status, answer) = read_response(&mut stream).await;
        panic!("the daemon stopped taking the list ({error}): {status} {answer}");
    }
    let upload = sent.elapsed();
    let (status, answer) = read_response(&mut stream).await;
    assert!(
        status.contains(" 200 "),
        "{status} {answer} (the upload took {upload:?})"
    );
    let report: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(report["rows"], ROWS, "{report}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_too_slow_to_send_its_list_is_told_so_and_nothing_is_recorded() {
    let app = common::spawn_app(|settings| {
        common::with_admin_token(settings);
        settings.admin.body_timeout_secs = 1;
    })
    .await;
    let body = list(0, 1000);
    let mut stream = TcpStream::connect(app.admin_addr).await.expect("connect");
    let head = request_head(app.admin_addr, ADMIN_TOKEN, "org=org_1", body.len(), false);
    stream.write_all(head.as_bytes()).await.expect("head sent");
    stream
        .write_all(&body.as_bytes()[..100])
        .await
        .expect("the start of the list sent");

    // The rest never comes: the daemon answers once the deadline has passed.
    let (status, answer) = read_response(&mut stream).await;
    assert!(status.contains(" 408 "), "{status} {answer}");
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    let message = answer["message"].as_str().expect("a message");
    assert!(message.contains("the client was too slow"), "{message}");
    assert!(message.contains("100 bytes"), "{message}");
    assert_eq!(app.count("SELECT COUNT(*) FROM ledger").await, 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_two_imports_at_once_another_is_answered_429_with_retry_after() {
    let app = common::spawn_app(common::with_admin_token).await;
    let console = Console::sign_in(&app).await;
    let body = list(0, 100);

    // Two uploads that have begun (the daemon asked for their bodies) and go on slowly.
    let mut slow = Vec::new();
    for i in 0..2 {
        let mut stream = TcpStream::connect(app.admin_addr).await.expect("connect");
        let query = format!("org=org_{i}");
        let head = request_head(app.admin_addr, ADMIN_TOKEN, &query, body.len(), true);
        stream.write_all(head.as_bytes()).await.expect("head sent");
        let answer = read_head(&mut stream).await;
        assert!(answer.starts_with("HTTP/1.1 100 Continue"), "{answer}");
        stream
            .write_all(&body.as_bytes()[..10])
            .await
            .expect("a little sent");
        slow.push(stream);
    }

    let (status, headers, refused) = import(&app, "org=org_9", body.clone()).await;
    assert_eq!(status, 429, "{refused}");
    let retry: u64 = headers["retry-after"]
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("seconds");
    assert!(retry > 0);
    assert_eq!(refused["code"], 429);
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("imports")),
        "{refused}"
    );
    let (status, page) = console.preview(&body).await;
    assert_eq!(status, 429, "{page}");
    assert!(page.contains("id=\"import-error\""), "{page}");

    // Once they are done, another is taken.
    for stream in &mut slow {
        stream
            .write_all(&body.as_bytes()[10..])
            .await
            .expect("the rest sent");
        let answer = read_head(stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let (status, _, report) = import(&app, "org=org_9", body).await;
    assert_eq!(status, 200, "{report}");
    app.stop().await;
}
