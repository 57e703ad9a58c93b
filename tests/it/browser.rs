//! The console in a real browser: headless Chromium driven over WebDriver (Debian's
//! `chromium` and `chromium-driver`; `.ci/run` installs them).
//!
//! The driver is `OUTREACH_SYNC_TEST_CHROMEDRIVER`, else `chromedriver` on the PATH; without
//! either these tests say so on the terminal and pass without running (as the PostgreSQL
//! tests do). With the variable set, a driver that does not start fails the test.
//!
//! With `OUTREACH_SYNC_SCREENSHOTS=DIR` the tests also save the screenshots docs/console.md
//! shows.

use outreach_sync::store::codec;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::Duration;

use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::common::{TestApp, consent_event, spawn_app, within};

const DRIVER_VARIABLE: &str = "OUTREACH_SYNC_TEST_CHROMEDRIVER";
const SCREENSHOTS_VARIABLE: &str = "OUTREACH_SYNC_SCREENSHOTS";
/// The named token the tests sign in with: changes are recorded as `compliance`'s.
const TOKEN: &str = "console-token-7f3a";
const ACTOR: &str = "compliance";

/// A headless Chromium of its own, with its driver; both end with it.
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    /// Where downloads go.
    downloads: tempfile::TempDir,
}

impl Drop for Browser {
    /// Ends the driver and every browser process it started, whether the test passed or
    /// panicked: they run in a process group of their own (killing the driver alone leaves
    /// Chromium running, orphaned).
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn driver_path() -> Option<(PathBuf, bool)> {
    if let Ok(path) = std::env::var(DRIVER_VARIABLE) {
        return Some((PathBuf::from(path), true));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromedriver"))
            .find(|path| path.is_file())
            .map(|path| (path, false))
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Browser {
    /// A browser, or `None` (said once on the terminal) when no driver is installed.
    async fn start() -> Option<Browser> {
        let Some((driver, required)) = driver_path() else {
            static SKIPPED: Once = Once::new();
            SKIPPED.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "\nBrowser tests SKIPPED: no chromedriver on the PATH and {DRIVER_VARIABLE} \
                     is not set (apt-get install chromium chromium-driver); the console was \
                     tested over HTTP only.\n"
                );
            });
            return None;
        };
        let port = free_port();
        // A process group of its own, which the browsers it starts join: ended whole on drop.
        let child = Command::new(&driver)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let driver = match child {
            Ok(child) => child,
            Err(e) if !required => {
                let _ = writeln!(std::io::stderr(), "\nBrowser tests SKIPPED: {e}\n");
                return None;
            }
            Err(e) => panic!(
                "{DRIVER_VARIABLE} is set but {} does not start: {e}",
                driver.display()
            ),
        };
        let profile = tempfile::tempdir().expect("profile dir");
        let downloads = tempfile::tempdir().expect("downloads dir");
        let mut options = json!({
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                format!("--user-data-dir={}", profile.path().display()),
            ],
            "prefs": {
                "download.default_directory": downloads.path(),
                "download.prompt_for_download": false,
            },
        });
        if let Ok(binary) = std::env::var("OUTREACH_SYNC_TEST_CHROMIUM") {
            options["binary"] = json!(binary);
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), options);
        let url = format!("http://127.0.0.1:{port}");
        // The driver (another process) listens a moment after it starts.
        let mut last_error = None;
        let client = within(Duration::from_secs(10), async || {
            ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
                .map_err(|e| last_error = Some(e.to_string()))
                .ok()
        })
        .await;
        let Some(client) = client else {
            panic!("the browser did not start: {last_error:?}");
        };
        Some(Browser {
            client,
            driver,
            _profile: profile,
            downloads,
        })
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_owned()
    }

    async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .text()
            .await
            .expect("text")
    }

    async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.expect("script")
    }

    /// Presses Enter where the focus is, and waits for the page that follows (a link
    /// followed or a form sent).
    async fn enter_and_wait(&self) {
        self.js("window.outreachSyncOldPage = true;").await;
        self.press(&char::from(Key::Enter).to_string()).await;
        let followed = within(Duration::from_secs(10), async || {
            let loaded = self
                .client
                .execute(
                    "return window.outreachSyncOldPage === undefined \
                         && document.readyState === 'complete';",
                    vec![],
                )
                .await;
            // A script may fail while the next page replaces this one.
            matches!(loaded, Ok(Value::Bool(true)))
        })
        .await;
        if followed.is_none() {
            panic!("no page followed Enter on {}", self.path().await);
        }
    }

    /// Presses `key` where the focus is.
    async fn press(&self, key: &str) {
        self.client
            .active_element()
            .await
            .expect("focus")
            .send_keys(key)
            .await
            .expect("keys");
    }

    /// Presses Tab until the focused element matches `css` (at most 40 times), as a person
    /// with no mouse would.
    async fn tab_to(&self, css: &str) {
        for _ in 0..40 {
            self.press(&char::from(Key::Tab).to_string()).await;
            let at = self
                .client
                .execute(
                    "return document.activeElement.matches(arguments[0]);",
                    vec![json!(css)],
                )
                .await
                .expect("script");
            if at == json!(true) {
                return;
            }
        }
        panic!("Tab never reached {css}");
    }

    /// Every field of the page has a label, and the page fits a phone-sized screen when
    /// the window is one.
    async fn check_page(&self) {
        let unlabelled = self
            .js(
                "return [...document.querySelectorAll('input:not([type=hidden]), textarea, select')]
                    .filter(e => e.labels.length === 0).map(e => e.name);",
            )
            .await;
        assert_eq!(
            unlabelled,
            json!([]),
            "fields without a label on {}",
            self.path().await
        );
        let overflow = self
            .js("return document.documentElement.scrollWidth - window.innerWidth;")
            .await;
        if overflow.as_i64().unwrap_or(0) > 0 {
            let wide = self
                .js("return [...document.querySelectorAll('body *')]
                        .filter(e => e.getBoundingClientRect().right > window.innerWidth)
                        .map(e => e.tagName + '.' + e.className).slice(0, 8);")
                .await;
            panic!(
                "{} scrolls sideways by {overflow}px: {wide}",
                self.path().await
            );
        }
    }

    async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os(SCREENSHOTS_VARIABLE) else {
            return;
        };
        let png = self.client.screenshot().await.expect("screenshot");
        // A relative DIR is the repository's (the suite runs in crates/cli).
        let dir = crate::repository("").join(dir);
        std::fs::write(dir.join(format!("{name}.png")), png).expect("save");
    }

    /// Signs in with the keyboard: the token typed into the focused field, then Enter.
    async fn sign_in(&self, app: &TestApp, token: &str) {
        self.goto(&app.admin_url("/")).await;
        assert_eq!(
            self.path().await,
            "/signin",
            "a stranger is asked to sign in"
        );
        self.check_page().await;
        let field = self.client.active_element().await.expect("focus");
        assert_eq!(
            field.attr("id").await.expect("id").as_deref(),
            Some("token")
        );
        field.send_keys(token).await.expect("type");
        self.enter_and_wait().await;
    }
}

async fn console_app() -> TestApp {
    spawn_app(|s| {
        s.admin.tokens = vec![format!("{ACTOR}:{TOKEN}").into()];
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opt_out_received_by_webhook_is_followed_to_its_evidence() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let app = console_app().await;
    let delivered = consent_event("evt-stop-1", "+15550001111", true);
    assert_eq!(app.post_signed(&delivered).await.status(), 200);
    app.drain().await;

    // A wrong token is refused, and says so.
    browser.sign_in(&app, "not-the-token").await;
    assert_eq!(browser.path().await, "/signin");
    assert!(
        browser
            .text(".error")
            .await
            .contains("not one of the admin tokens")
    );
    browser.screenshot("signin").await;

    browser.sign_in(&app, TOKEN).await;
    assert_eq!(browser.path().await, "/");
    assert!(browser.text(".who").await.contains(ACTOR));

    // The number typed into the lookup, then Enter.
    let phone = browser
        .client
        .find(Locator::Id("phoneNumber"))
        .await
        .expect("field");
    phone.send_keys("+15550001111").await.expect("type");
    browser.enter_and_wait().await;
    browser.check_page().await;
    let now = browser
        .text("section[aria-labelledby=now-heading] tbody tr")
        .await;
    assert!(now.contains("org_1") && now.contains("Opted out"), "{now}");
    let entry = browser.text(".timeline li").await;
    assert!(
        entry.contains("announced by the service's webhook"),
        "{entry}"
    );

    // Its evidence, opened from the keyboard: the delivery as received, pretty-printed.
    browser.tab_to(".timeline summary").await;
    browser.press(&char::from(Key::Enter).to_string()).await;
    let evidence = browser.text(".timeline details").await;
    assert!(evidence.contains("\"id\": \"evt-stop-1\""), "{evidence}");
    assert!(
        evidence.contains("verified with webhook.secrets entry 0"),
        "{evidence}"
    );
    browser.screenshot("lookup").await;

    // The bundle the download link saves holds the exact delivery.
    browser.tab_to("a[download]").await;
    browser.press(&char::from(Key::Enter).to_string()).await;
    let saved = browser.downloads.path().join("evidence-15550001111.json");
    // The browser, another process, writes it when it will.
    let bundle = within(Duration::from_secs(5), async || {
        let bytes = std::fs::read(&saved).ok()?;
        serde_json::from_slice::<Value>(&bytes).ok()
    })
    .await;
    let bundle = bundle.expect("the evidence bundle was saved");
    let body = bundle["items"][0]["evidence"]["bodyBase64"]
        .as_str()
        .unwrap_or_else(|| panic!("the delivery's bytes in {bundle}"));
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("base64");
    assert_eq!(body, delivered.as_bytes());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_opt_out_is_made_with_the_keyboard_alone_and_a_forged_form_is_refused() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let app = console_app().await;
    browser.sign_in(&app, TOKEN).await;

    // From the navigation to the form, and through it, by Tab and typing.
    browser.tab_to("a[href='/change']").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/change");
    browser.check_page().await;
    browser.tab_to("#phoneNumber").await;
    browser.press("+15550002222").await;
    browser.tab_to("#organizationId").await;
    browser.press("org_1").await;
    browser.tab_to("#reason").await;
    browser.press("Asked by phone to stop, call ref 2231").await;
    browser.screenshot("change").await;
    browser.tab_to("form[action='/change'] button").await;
    browser.enter_and_wait().await;

    assert_eq!(browser.path().await, "/");
    assert!(
        browser
            .text(".notice")
            .await
            .contains("Recorded as ledger entry #1")
    );
    let entry = browser.text(".timeline li").await;
    assert!(
        entry.contains(&format!("Opted out: changed here by {ACTOR}")),
        "{entry}"
    );
    let evidence: Value = reqwest::Client::new()
        .get(app.admin_url("/v1/consent/evidence?phoneNumber=%2B15550002222"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("evidence")
        .json()
        .await
        .expect("a bundle");
    assert_eq!(evidence["items"][0]["evidence"]["actor"], ACTOR);
    assert_eq!(
        evidence["items"][0]["reason"],
        "Asked by phone to stop, call ref 2231"
    );

    // The same form without its security token: refused, and nothing recorded.
    browser.goto(&app.admin_url("/change")).await;
    browser
        .js("document.querySelector('form[action=\"/change\"] input[name=csrf]').remove();")
        .await;
    browser.tab_to("#phoneNumber").await;
    browser.press("+15550003333").await;
    browser.tab_to("#organizationId").await;
    browser.press("org_1").await;
    browser.tab_to("#reason").await;
    browser.press("forged").await;
    browser.tab_to("form[action='/change'] button").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.text("h1").await, "Refused");
    assert!(browser.text(".error").await.contains("security token"));
    let ledger = app.count("SELECT COUNT(*) FROM ledger").await;
    assert_eq!(ledger, 1, "the forged change was not recorded");

    // On a phone-sized screen every page still fits, without sideways scrolling.
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("resize");
    for page in [
        "/?phoneNumber=%2B15550002222",
        "/status",
        "/quarantine",
        "/change",
    ] {
        browser.goto(&app.admin_url(page)).await;
        browser.check_page().await;
    }
    browser
        .goto(&app.admin_url("/?phoneNumber=%2B15550002222"))
        .await;
    browser.screenshot("phone").await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_delivery_is_replayed_and_the_status_charts_deliveries() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let app = console_app().await;
    for i in 0..12 {
        let event = consent_event(
            &format!("evt-{i}"),
            &format!("+1555000{:04}", 4000 + i),
            i % 3 == 0,
        );
        assert_eq!(app.post_signed(&event).await.status(), 200);
    }
    app.drain().await;
    // Receipt times spread over the hour (ids stay in receipt order): 4 deliveries half an
    // hour before `now`, 3 ten minutes before, 5 at `now`. One instant for all, so that a
    // minute turning during the test moves every bar alike.
    let now = chrono::Utc::now();
    let at =
        |minutes_before: i64| codec::timestamp(now - chrono::Duration::minutes(minutes_before));
    for (ids, minutes_before) in [("1 AND 4", 30), ("5 AND 7", 10), ("8 AND 12", 0)] {
        app.execute(&format!(
            "UPDATE outbox SET received_at = '{}' WHERE id BETWEEN {ids}",
            at(minutes_before)
        ))
        .await;
    }
    // One that failed to apply before its cause was mended, kept in quarantine.
    let late = consent_event("evt-late", "+15550009999", true);
    app.execute(&format!(
        "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index, state,
                             attempts, last_error)
         VALUES ('event:evt-late', '{}', CAST('{late}' AS BLOB),
                 '{{}}', 0, 'quarantined', 5, 'database is locked (the disk was full)')",
        at(0)
    ))
    .await;

    browser.sign_in(&app, TOKEN).await;
    browser.tab_to("a[href='/status']").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/status");
    browser.check_page().await;
    let caption = browser.text(".chart figcaption").await;
    assert!(
        caption.starts_with("13 deliveries in the last hour; at most 6 in a minute"),
        "{caption}"
    );
    let bars = browser
        .js("return [...document.querySelectorAll('.chart rect')].map(r => r.textContent);")
        .await;
    let bars: Vec<String> = serde_json::from_value(bars).expect("titles");
    assert_eq!(bars.len(), 60);
    // Each bar's title is "HH:MM UTC: count".
    let count_at = |minutes_before: i64| -> Option<i64> {
        let minute = (now - chrono::Duration::minutes(minutes_before)).format("%H:%M UTC: ");
        let prefix = minute.to_string();
        bars.iter()
            .find_map(|t| t.strip_prefix(prefix.as_str()))
            .and_then(|n| n.parse().ok())
    };
    assert_eq!(count_at(0), Some(6), "the minute of `now`: {bars:?}");
    assert_eq!(count_at(10), Some(3), "ten minutes before: {bars:?}");
    assert_eq!(count_at(30), Some(4), "half an hour before: {bars:?}");
    assert!(
        bars.last()
            .is_some_and(|t| t.starts_with(&now.format("%H:%M").to_string())
                || t.starts_with(
                    &(now + chrono::Duration::minutes(1))
                        .format("%H:%M")
                        .to_string()
                )),
        "the last bar is the current minute: {bars:?}"
    );
    assert_eq!(
        browser.text(".tiles div:nth-child(3) dd").await,
        "1",
        "quarantined"
    );
    browser.screenshot("status").await;

    browser.goto(&app.admin_url("/quarantine")).await;
    browser.check_page().await;
    let row = browser.text("tbody tr").await;
    assert!(
        row.contains("#13") && row.contains("the disk was full"),
        "{row}"
    );
    browser.screenshot("quarantine").await;
    browser
        .tab_to("form[action='/quarantine/13/replay'] button")
        .await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/quarantine");
    assert_eq!(
        browser.text(".notice").await,
        "Delivery #13 was replayed and applied."
    );
    assert!(
        browser
            .text("main")
            .await
            .contains("Nothing is quarantined.")
    );
    let entries = app
        .count("SELECT COUNT(*) FROM ledger WHERE phone_number = '+15550009999'")
        .await;
    assert_eq!(entries, 1, "the replayed delivery reached the ledger");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_leads_a_newcomer_from_an_opt_out_to_its_evidence() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("demo dir");
    let mut demo = tokio::process::Command::new(crate::daemon_process::BIN)
        .args(["demo", "--duration", "60", "--leads", "200", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the demo starts");
    let stdout = demo.stdout.take().expect("stdout");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    // What a newcomer reads: the console's address and token, then a link to an opt-out.
    let (mut console, mut token, mut link) = (None, None, None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(50);
    while link.is_none() {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .expect("the demo prints an opt-out's evidence link in time")
            .expect("read")
            .expect("the demo is still running");
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
        if line.contains("its evidence:") {
            link = word_after("its evidence:");
        }
    }
    let (console, token, link) = (
        console.expect("the console's address"),
        token.expect("a token"),
        link.expect("a link"),
    );
    assert!(link.starts_with(&console), "{link} is on {console}");

    browser.goto(&link).await;
    assert_eq!(browser.path().await, "/signin", "asked to sign in first");
    let field = browser.client.active_element().await.expect("focus");
    field.send_keys(&token).await.expect("type");
    browser.enter_and_wait().await;
    // Back on the page of the link, signed in as the demo's operator.
    assert_eq!(browser.path().await, "/");
    assert!(browser.text(".who").await.contains("operator"));
    // The demo is live: by the time the page loads, its activity may have opted the number
    // in again. What the link promises is the opt-out in the number's history, with its
    // evidence; the current state shows whichever is newest.
    let now = browser
        .text("section[aria-labelledby=now-heading] tbody")
        .await;
    assert!(
        now.contains("Opted out") || now.contains("Opted in"),
        "{now}"
    );
    let timeline = browser.text(".timeline").await;
    assert!(timeline.contains("Opted out"), "{timeline}");
    browser.tab_to(".timeline summary").await;
    browser.press(&char::from(Key::Enter).to_string()).await;
    let evidence = browser.text(".timeline details").await;
    assert!(
        evidence.contains("Body as received") || evidence.contains("Lead as fetched"),
        "{evidence}"
    );
    let _ = demo.kill().await;
}

/// As found: `/signin?next=%2F%09%2Fevil.example` answered `location: /<TAB>/evil.example`,
/// which Chromium reads as `//evil.example`: a signed-in user landed on the other host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_never_leaves_the_console_for_another_host_whatever_next_says() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let app = console_app().await;
    for next in [
        "%2F%09%2Fevil.example",
        "%2F%5Cevil.example",
        "%2F%2Fevil.example",
    ] {
        browser
            .goto(&app.admin_url(&format!("/signin?next={next}")))
            .await;
        let field = browser.client.active_element().await.expect("focus");
        field.send_keys(TOKEN).await.expect("type");
        browser.enter_and_wait().await;
        let url = browser.client.current_url().await.expect("url");
        assert_eq!(url.host_str(), Some("127.0.0.1"), "{next}: {url}");
        assert_eq!(url.port(), Some(app.admin_addr.port()), "{next}: {url}");
        assert_eq!(url.path(), "/", "{next}: {url}");
        // Signed out again for the next try.
        browser.client.delete_all_cookies().await.expect("cookies");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compliance_page_shows_an_opt_out_a_stopped_tool_has_not_had_and_prints_as_a_file() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    // The CRM's receiver is down: nothing answers at its URL.
    let down = crate::receiver::Receiver::start([]).await;
    let url = down.url();
    down.stop();
    let app = spawn_app(|s| {
        s.admin.tokens = vec![format!("{ACTOR}:{TOKEN}").into()];
        s.subscriber
            .push(outreach_sync::settings::SubscriberSettings::new(
                "crm",
                &url,
                crate::receiver::SUBSCRIBER_SECRET,
            ));
    })
    .await;
    let stop = consent_event("evt-stop-2", "+15550002222", true);
    assert_eq!(app.post_signed(&stop).await.status(), 200);
    app.settle().await;

    browser.sign_in(&app, TOKEN).await;
    browser.tab_to("a[href='/compliance']").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/compliance");
    browser.check_page().await;
    let totals = browser.text("#totals tbody").await;
    assert!(totals.starts_with('1'), "one opt-out: {totals}");
    let late = browser.text("#late tbody tr").await;
    assert!(
        late.contains("pending") && late.contains("+15550002222") && late.contains("crm"),
        "{late}"
    );
    // The event is dated 2026-11-21: it has waited days.
    assert!(late.contains(" days "), "waiting: {late}");
    browser.screenshot("compliance").await;

    // The number leads to its timeline.
    browser.tab_to("#late a").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/");
    assert!(browser.text(".timeline li").await.contains("Opted out"));

    // The printable file: the same report, standing alone.
    browser.goto(&app.admin_url("/compliance")).await;
    browser.tab_to("#download").await;
    browser.press(&char::from(Key::Enter).to_string()).await;
    let saved = within(Duration::from_secs(5), async || {
        let entry = std::fs::read_dir(browser.downloads.path())
            .ok()?
            .filter_map(Result::ok)
            .find(|e| e.file_name().to_string_lossy().ends_with(".html"))?;
        std::fs::read_to_string(entry.path()).ok()
    })
    .await
    .expect("the report was saved");
    assert!(
        saved.contains("<svg") && saved.contains("+15550002222"),
        "{saved}"
    );
    for outside in ["<script", "src=", "<link", "http://", "https://"] {
        assert!(!saved.contains(outside), "the file holds {outside}");
    }
    app.stop().await;
}

crate::common::on_both_backends!(
    a_reply_put_to_review_is_decided_with_the_keyboard_and_reaches_the_service,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_reply_put_to_review_is_decided_with_the_keyboard_and_reaches_the_service(
    backend: crate::common::Backend,
) {
    use crate::sources::twilio::{TOKEN as TWILIO_TOKEN, text_from, texting};
    let Some(browser) = Browser::start().await else {
        return;
    };
    let Some((sandbox, mut app)) = texting(backend, &[TWILIO_TOKEN]).await else {
        return;
    };
    app.settings.admin.tokens = vec![format!("{ACTOR}:{TOKEN}").into()];
    let app = app.restart().await;
    let (lead, _) = crate::destinations::once::opted_in_with_van_id(&sandbox);
    let said = "please stop texting me about the rally";
    assert_eq!(
        text_from(&app, "SMcon0001", &lead.phone_number, said)
            .await
            .0,
        200
    );
    assert_eq!(
        text_from(&app, "SMcon0002", "+15550107777", "cancel my order")
            .await
            .0,
        200
    );
    let waiting = "SELECT COUNT(*) FROM review_replies WHERE decision IS NULL";
    within(Duration::from_secs(30), async || {
        (app.count(waiting).await == 2).then_some(())
    })
    .await
    .expect("two replies wait for review");

    browser.sign_in(&app, TOKEN).await;
    browser.tab_to("a[href='/review']").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/review");
    browser.check_page().await;
    assert_eq!(browser.text("#waiting-heading").await, "Waiting (2)");
    let first = browser.text(".reply").await;
    assert!(
        first.contains(said) && first.contains(&lead.phone_number) && first.contains("Due"),
        "{first}"
    );
    browser.screenshot("review").await;

    // The first reply decided an opt-out, by Tab, Space and typing alone.
    browser.tab_to(".reply input[value=opt_out]").await;
    browser.press(" ").await;
    browser.tab_to(".reply input[name=reason]").await;
    browser.press("asked to stop, rally or not").await;
    browser.tab_to(".reply button").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.path().await, "/review");
    let notice = browser.text(".notice").await;
    assert!(notice.contains("decided an opt-out"), "{notice}");
    assert_eq!(browser.text("#waiting-heading").await, "Waiting (1)");
    let decided = browser
        .text("table[aria-labelledby=decided-heading] tbody")
        .await;
    assert!(
        decided.contains("opt-out") && decided.contains(ACTOR) && decided.contains("rally or not"),
        "{decided}"
    );
    crate::sources::opted_out_at_service(&sandbox, &lead).await;
    let history = outreach_sync::ledger::history(&app.pool, &lead.phone_number, None)
        .await
        .expect("history");
    let entry = history
        .iter()
        .find(|e| e.source.as_str() == "twilio" && e.opted_out)
        .expect("the opt-out decided");
    let evidence: Vec<(String,)> = app
        .rows(&format!(
            "SELECT CAST(evidence AS TEXT) FROM ledger WHERE seq = {}",
            entry.seq
        ))
        .await;
    let evidence: Value = serde_json::from_str(&evidence[0].0).expect("evidence");
    assert_eq!(evidence["standsOn"]["decision"]["by"], ACTOR, "{evidence}");

    // The other, sent without its security token: refused, and still waiting.
    browser
        .js("document.querySelector('.reply input[name=csrf]').remove();")
        .await;
    browser.tab_to(".reply input[value=opt_out]").await;
    // Within a group of choices the arrows choose, as everywhere.
    browser.press(&char::from(Key::Down).to_string()).await;
    browser.tab_to(".reply button").await;
    browser.enter_and_wait().await;
    assert_eq!(browser.text("h1").await, "Refused");
    assert!(browser.text(".error").await.contains("security token"));
    assert_eq!(
        app.count(waiting).await,
        1,
        "the forged decision was not recorded"
    );

    // Decided not an opt-out: kept as decided, nothing recorded for the number.
    browser.goto(&app.admin_url("/review")).await;
    browser.tab_to(".reply input[value=opt_out]").await;
    // Within a group of choices the arrows choose, as everywhere.
    browser.press(&char::from(Key::Down).to_string()).await;
    browser.tab_to(".reply button").await;
    browser.enter_and_wait().await;
    assert!(
        browser.text(".notice").await.contains("not an opt-out"),
        "the decision confirmed"
    );
    assert_eq!(browser.text(".empty").await, "No reply is waiting.");
    let recorded = app
        .count("SELECT COUNT(*) FROM ledger WHERE phone_number = '+15550107777'")
        .await;
    assert_eq!(recorded, 0, "not an opt-out records nothing");

    // A phone-sized screen: the page still fits.
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("resize");
    browser.goto(&app.admin_url("/review")).await;
    browser.check_page().await;
    app.stop().await;
}
