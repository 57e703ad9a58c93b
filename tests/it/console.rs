//! The console over plain HTTP: sessions, CSRF, headers, evidence download.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use outreach_sync::store::codec;
use reqwest::redirect::Policy;
use reqwest::{Response, StatusCode};
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::common::{
    ADMIN_TOKEN, Backend, TestApp, consent_event, on_both_backends, spawn_app, spawn_app_on,
    with_admin_token,
};

const SESSION_COOKIE: &str = "outreach_sync_session";
const SIGNIN_COOKIE: &str = "outreach_sync_signin";
/// A named admin token: its sessions' changes are recorded with the actor `compliance`.
const COMPLIANCE: &str = "compliance:tok-123";
const COMPLIANCE_TOKEN: &str = "tok-123";

/// Configures `tokens` as the admin tokens.
fn with_tokens(
    tokens: &'static [&'static str],
) -> impl FnOnce(&mut outreach_sync::settings::Settings) {
    move |settings| {
        settings.admin.tokens = tokens.iter().map(|t| SecretString::from(*t)).collect();
    }
}

/// One `Set-Cookie` of a response.
#[derive(Debug, Clone)]
struct SetCookie {
    name: String,
    value: String,
    /// The whole header, attributes and all.
    header: String,
}

impl SetCookie {
    fn has(&self, attribute: &str) -> bool {
        self.header
            .split(';')
            .any(|part| part.trim().eq_ignore_ascii_case(attribute))
    }

    fn removes(&self) -> bool {
        self.has("Max-Age=0")
    }
}

fn set_cookies(response: &Response) -> Vec<SetCookie> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|value| {
            let header = value.to_str().expect("an ASCII Set-Cookie").to_owned();
            let pair = header.split(';').next().unwrap_or_default();
            let (name, value) = pair.split_once('=').expect("name=value");
            SetCookie {
                name: name.trim().to_owned(),
                value: value.trim().to_owned(),
                header,
            }
        })
        .collect()
}

fn set_cookie(response: &Response, name: &str) -> Option<SetCookie> {
    set_cookies(response).into_iter().find(|c| c.name == name)
}

fn location(response: &Response) -> String {
    assert_eq!(
        response.status(),
        StatusCode::SEE_OTHER,
        "a redirect expected from {}",
        response.url()
    );
    response.headers()["location"]
        .to_str()
        .expect("ASCII")
        .to_owned()
}

/// The value of the first input named `name` of a page (as askama escaped it: the values
/// looked for here need no escaping).
pub(crate) fn input_value(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no input {name} in {html}"))
        + marker.len();
    let end = html[start..].find('"').expect("a closing quote") + start;
    html[start..end].to_owned()
}

/// `text` as askama writes it into a page.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Someone using the console over plain HTTP: a cookie jar of their own, and redirects shown
/// instead of followed.
#[derive(Clone)]
pub(crate) struct Visitor {
    http: reqwest::Client,
    /// `http://ADDR` of the admin listener it talks to.
    base: String,
    cookies: Vec<(String, String)>,
}

impl Visitor {
    pub(crate) fn new(app: &TestApp) -> Self {
        Self::at(app.admin_addr)
    }

    fn at(admin_addr: std::net::SocketAddr) -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("a client"),
            base: format!("http://{admin_addr}"),
            cookies: Vec::new(),
        }
    }

    /// The same cookies, sent to another listener.
    fn moved_to(&self, admin_addr: std::net::SocketAddr) -> Self {
        Self {
            cookies: self.cookies.clone(),
            ..Self::at(admin_addr)
        }
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Keeps the cookies `response` sets (and drops those it removes).
    fn keep(&mut self, response: &Response) {
        for cookie in set_cookies(response) {
            self.cookies.retain(|(name, _)| *name != cookie.name);
            if !cookie.removes() {
                self.cookies.push((cookie.name, cookie.value));
            }
        }
    }

    fn with_cookies(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect();
            request = request.header("cookie", header.join("; "));
        }
        request
    }

    async fn get(&self, path: &str) -> Response {
        self.with_cookies(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .expect("GET")
    }

    pub(crate) async fn text(&self, path: &str) -> String {
        let response = self.get(path).await;
        assert_eq!(response.status(), 200, "GET {path}");
        response.text().await.expect("a page")
    }

    /// A form POST as a visitor sends it: with this listener as its `Origin`.
    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Response {
        let origin = self.base.clone();
        self.post_from(Some(&origin), path, form).await
    }

    async fn post_from(&self, origin: Option<&str>, path: &str, form: &[(&str, &str)]) -> Response {
        let mut request = self
            .with_cookies(self.http.post(format!("{}{path}", self.base)))
            .form(form);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().await.expect("POST")
    }

    /// The sign-in form's token (and its cookie, kept).
    async fn signin_form(&mut self, query: &str) -> (String, String) {
        let response = self.get(&format!("/signin{query}")).await;
        assert_eq!(response.status(), 200);
        assert!(set_cookie(&response, SIGNIN_COOKIE).is_some());
        self.keep(&response);
        let html = response.text().await.expect("a page");
        (input_value(&html, "csrf"), input_value(&html, "next"))
    }

    /// Signs in with `token` by the form, as a person does; the answer to the POST.
    async fn sign_in_answer(&mut self, token: &str) -> Response {
        let (csrf, next) = self.signin_form("").await;
        let response = self
            .post(
                "/signin",
                &[("csrf", &csrf), ("token", token), ("next", &next)],
            )
            .await;
        self.keep(&response);
        response
    }

    /// Signs in with `token`, which must work.
    pub(crate) async fn sign_in(&mut self, token: &str) {
        let response = self.sign_in_answer(token).await;
        assert_eq!(location(&response), "/");
        assert!(self.cookie(SESSION_COOKIE).is_some());
    }

    /// The session's form token, as every page of the session carries it.
    async fn csrf(&self) -> String {
        input_value(&self.text("/change").await, "csrf")
    }

    /// Whether the session opens a page: `/status` answers it, or sends it to sign in.
    async fn signed_in(&self) -> bool {
        let response = self.get("/status").await;
        match response.status() {
            StatusCode::OK => true,
            StatusCode::SEE_OTHER => {
                assert_eq!(location(&response), "/signin?next=/status");
                false
            }
            status => panic!("/status answered {status}"),
        }
    }
}

/// The daemon on `backend` with [`ADMIN_TOKEN`], and a visitor signed in with it.
async fn signed_in_app(backend: Backend) -> Option<(TestApp, Visitor)> {
    let app = spawn_app_on(backend, with_admin_token).await?;
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(ADMIN_TOKEN).await;
    Some((app, visitor))
}

async fn ledger_entries(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM ledger").await
}

async fn sessions(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM console_sessions").await
}

/// The `/v1` evidence bundle of `phone`, with the bearer `token`.
async fn evidence_of(app: &TestApp, token: &str, phone: &str) -> Value {
    let response = app
        .http
        .get(app.admin_url(&format!(
            "/v1/consent/evidence?phoneNumber={}",
            phone.replace('+', "%2B")
        )))
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

on_both_backends!(pages_need_a_session_which_only_the_right_token_opens);
async fn pages_need_a_session_which_only_the_right_token_opens(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let mut visitor = Visitor::new(&app);

    // Not signed in: every page sends to the sign-in page, and back after.
    for (path, next) in [
        ("/", ""),
        ("/status", "?next=/status"),
        ("/quarantine", "?next=/quarantine"),
        ("/change", "?next=/change"),
        (
            "/change?phoneNumber=%2B15550001111",
            "?next=/change%3FphoneNumber%3D%252B15550001111",
        ),
        (
            "/evidence?phoneNumber=%2B15550001111",
            "?next=/evidence%3FphoneNumber%3D%252B15550001111",
        ),
    ] {
        let response = visitor.get(path).await;
        assert_eq!(location(&response), format!("/signin{next}"), "GET {path}");
    }
    // A form posted once the session lapsed: to sign in, and then to the start (its path
    // is no page to go back to).
    for path in ["/change", "/quarantine/1/replay", "/signout"] {
        let response = visitor.post(path, &[("csrf", "x")]).await;
        assert_eq!(location(&response), "/signin", "POST {path}");
    }

    // A wrong token: refused, said so, and no session.
    let response = visitor.sign_in_answer("not-the-token").await;
    assert_eq!(response.status(), 401);
    assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    let html = response.text().await.unwrap();
    assert!(html.contains("not one of the admin tokens"), "{html}");
    assert!(!visitor.signed_in().await);
    assert_eq!(sessions(&app).await, 0);

    // The right one, from the page the person was sent from: back there, signed in.
    let (csrf, next) = visitor.signin_form("?next=/status").await;
    assert_eq!(next, "/status");
    let response = visitor
        .post(
            "/signin",
            &[("csrf", &csrf), ("token", ADMIN_TOKEN), ("next", &next)],
        )
        .await;
    assert_eq!(location(&response), "/status");
    let cookie = set_cookie(&response, SESSION_COOKIE).expect("a session cookie");
    assert!(cookie.has("HttpOnly"), "{}", cookie.header);
    assert!(cookie.has("SameSite=Strict"), "{}", cookie.header);
    assert!(cookie.has("Path=/"), "{}", cookie.header);
    assert!(
        cookie.value.len() >= 43,
        "256 random bits: {}",
        cookie.header
    );
    assert!(
        !cookie.header.contains(ADMIN_TOKEN),
        "the token is not the cookie"
    );
    let signin = set_cookie(&response, SIGNIN_COOKIE).expect("the form's cookie");
    assert!(signin.removes(), "{}", signin.header);
    visitor.keep(&response);

    let status = visitor.get("/status").await;
    assert_eq!(status.status(), 200);
    let html = status.text().await.unwrap();
    assert!(
        html.contains("Signed in as <strong>token-1</strong>"),
        "{html}"
    );
    // Signed in, the sign-in page goes straight on.
    assert_eq!(
        location(&visitor.get("/signin?next=/quarantine").await),
        "/quarantine"
    );
    app.stop().await;
}

#[tokio::test]
async fn sign_in_needs_its_own_form_and_returns_only_to_this_listener() {
    let app = spawn_app(with_admin_token).await;
    let mut visitor = Visitor::new(&app);
    let (csrf, _) = visitor.signin_form("").await;
    let signin_cookie = visitor.cookie(SIGNIN_COOKIE).expect("kept").to_owned();

    // The right token, but the form came from elsewhere: no cookie of the form.
    let cookieless = Visitor::new(&app);
    let response = cookieless
        .post(
            "/signin",
            &[("csrf", &csrf), ("token", ADMIN_TOKEN), ("next", "/")],
        )
        .await;
    assert_eq!(response.status(), 403);
    assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("sign-in form is out of date")
    );
    // Its cookie, but another form token (or none).
    for form_token in [Some("another-form-token"), Some(""), None] {
        let mut form = vec![("token", ADMIN_TOKEN), ("next", "/")];
        if let Some(token) = form_token {
            form.push(("csrf", token));
        }
        let response = visitor.post("/signin", &form).await;
        assert_eq!(response.status(), 403, "{form_token:?}");
        assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    }
    // Its cookie and token, posted from another site.
    let response = visitor
        .post_from(
            Some("https://evil.example"),
            "/signin",
            &[("csrf", &csrf), ("token", ADMIN_TOKEN), ("next", "/")],
        )
        .await;
    assert_eq!(response.status(), 403);
    assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    assert_eq!(sessions(&app).await, 0);
    assert_eq!(visitor.cookie(SIGNIN_COOKIE), Some(signin_cookie.as_str()));

    // Another site as the place to go after: not followed.
    let (_, next) = visitor.signin_form("?next=//evil.example/").await;
    assert_eq!(next, "/", "the form does not carry it");
    for next in [
        "//evil.example",
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
    ] {
        let mut visitor = Visitor::new(&app);
        let (csrf, _) = visitor.signin_form("").await;
        let response = visitor
            .post(
                "/signin",
                &[("csrf", &csrf), ("token", ADMIN_TOKEN), ("next", next)],
            )
            .await;
        assert_eq!(location(&response), "/", "next={next}");
        assert!(set_cookie(&response, SESSION_COOKIE).is_some());
    }
    app.stop().await;
}

/// As found: 1,000 wrong tokens in 5 s, then the right one signed in. Past
/// `failed_auth_per_minute` failures the address is refused for a while, with the right
/// token too (it is not compared), and a person is told when to try again.
#[tokio::test]
async fn sign_ins_that_keep_failing_are_refused_for_a_while_even_with_the_right_token() {
    let app = spawn_app(|s| {
        with_admin_token(s);
        s.admin.failed_auth_per_minute = 2;
    })
    .await;
    let mut visitor = Visitor::new(&app);
    for _ in 0..2 {
        let refused = visitor.sign_in_answer("not-the-token").await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    }
    for token in ["not-the-token", ADMIN_TOKEN] {
        let limited = visitor.sign_in_answer(token).await;
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = limited.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=30).contains(&retry), "Retry-After: {retry}");
        let page = limited.text().await.unwrap();
        assert!(
            page.contains("Too many failed sign-ins from your address"),
            "{page}"
        );
        assert!(visitor.cookie(SESSION_COOKIE).is_none());
    }
    assert_eq!(sessions(&app).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn on_postgres_a_session_made_on_one_replica_works_on_another_and_ends_on_both() {
    let Some(first) = spawn_app_on(Backend::Postgres, |s| {
        with_admin_token(s);
        s.replica.name = "first".into();
    })
    .await
    else {
        return;
    };
    let second = first.replica("second").await;

    let mut on_first = Visitor::new(&first);
    on_first.sign_in(ADMIN_TOKEN).await;
    let on_second = on_first.moved_to(second.admin_addr);
    let html = on_second.text("/status").await;
    assert!(html.contains("Signed in as"), "{html}");
    // Its form token too: a change made through the second replica.
    let csrf = on_first.csrf().await;
    assert_eq!(on_second.csrf().await, csrf);
    let response = on_second
        .post(
            "/change",
            &change_form(Some(&csrf), "+15550007777", "asked at the front desk"),
        )
        .await;
    assert!(location(&response).contains("recorded="));

    // Signed out on the second: over on the first too.
    let response = on_second.post("/signout", &[("csrf", &csrf)]).await;
    assert_eq!(location(&response), "/signin?signedOut=true");
    assert!(!on_first.signed_in().await);
    assert!(!on_second.signed_in().await);
    second.stop().await;
    first.stop().await;
}

on_both_backends!(sign_out_ends_the_session_for_good);
async fn sign_out_ends_the_session_for_good(backend: Backend) {
    let Some((app, mut visitor)) = signed_in_app(backend).await else {
        return;
    };
    let kept = visitor.clone();
    let csrf = visitor.csrf().await;

    // A sign-out without the form token (a link on another site) does nothing.
    let response = visitor.post("/signout", &[]).await;
    assert_eq!(response.status(), 403);
    assert!(set_cookie(&response, SESSION_COOKIE).is_none());
    assert!(visitor.signed_in().await);

    let response = visitor.post("/signout", &[("csrf", &csrf)]).await;
    assert_eq!(location(&response), "/signin?signedOut=true");
    let cleared = set_cookie(&response, SESSION_COOKIE).expect("the cookie removed");
    assert!(
        cleared.removes() && cleared.value.is_empty(),
        "{}",
        cleared.header
    );
    visitor.keep(&response);
    assert!(visitor.cookie(SESSION_COOKIE).is_none());
    let html = visitor.text("/signin?signedOut=true").await;
    assert!(html.contains("You have signed out."), "{html}");

    // The old cookie, kept and sent again: signed out all the same.
    assert!(!kept.signed_in().await);
    assert_eq!(location(&kept.get("/").await), "/signin");
    let response = kept
        .post(
            "/change",
            &change_form(Some(&csrf), "+15550001111", "after sign-out"),
        )
        .await;
    assert!(location(&response).starts_with("/signin"));
    assert_eq!(ledger_entries(&app).await, 0);
    assert_eq!(sessions(&app).await, 0);
    app.stop().await;
}

on_both_backends!(a_token_removed_or_renamed_in_the_configuration_ends_its_sessions);
async fn a_token_removed_or_renamed_in_the_configuration_ends_its_sessions(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_tokens(&[COMPLIANCE, "ops:tok-456"])).await else {
        return;
    };
    let mut compliance = Visitor::new(&app);
    compliance.sign_in(COMPLIANCE_TOKEN).await;
    let mut ops = Visitor::new(&app);
    ops.sign_in("tok-456").await;

    // Restarted without the compliance token.
    let mut app = app;
    with_tokens(&["ops:tok-456"])(&mut app.settings);
    let app = app.restart().await;
    let compliance = compliance.moved_to(app.admin_addr);
    let ops = ops.moved_to(app.admin_addr);
    assert!(!compliance.signed_in().await, "its token is gone");
    assert!(
        ops.signed_in().await,
        "a kept token's session outlives a restart"
    );
    let mut again = Visitor::new(&app);
    assert_eq!(again.sign_in_answer(COMPLIANCE_TOKEN).await.status(), 401);

    // The ops token kept, under another name: its sessions would act under the old one.
    let mut app = app;
    with_tokens(&["auditor:tok-456"])(&mut app.settings);
    let app = app.restart().await;
    let ops = ops.moved_to(app.admin_addr);
    assert!(!ops.signed_in().await, "its token was renamed");
    let mut auditor = Visitor::new(&app);
    auditor.sign_in("tok-456").await;
    assert!(
        auditor
            .text("/status")
            .await
            .contains("Signed in as <strong>auditor</strong>")
    );
    app.stop().await;
}

on_both_backends!(a_session_lapses_after_its_lifetime_or_when_left_idle);
async fn a_session_lapses_after_its_lifetime_or_when_left_idle(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let mut visitors = Vec::new();
    for _ in 0..3 {
        let mut visitor = Visitor::new(&app);
        visitor.sign_in(ADMIN_TOKEN).await;
        assert!(visitor.signed_in().await);
        visitors.push(visitor);
    }
    let id_hash =
        |visitor: &Visitor| sha256_hex(visitor.cookie(SESSION_COOKIE).expect("a session"));
    let now = Utc::now().timestamp_millis();
    const MINUTE: i64 = 60_000;
    // Twelve hours after sign-in, however active; idle for 31 minutes; idle for 29.
    app.execute(&format!(
        "UPDATE console_sessions SET expires_ms = {} WHERE id_hash = '{}';
         UPDATE console_sessions SET seen_ms = {} WHERE id_hash = '{}';
         UPDATE console_sessions SET seen_ms = {} WHERE id_hash = '{}';",
        now - 1,
        id_hash(&visitors[0]),
        now - 31 * MINUTE,
        id_hash(&visitors[1]),
        now - 29 * MINUTE,
        id_hash(&visitors[2]),
    ))
    .await;

    assert!(!visitors[0].signed_in().await, "past its lifetime");
    assert!(!visitors[1].signed_in().await, "idle too long");
    assert!(visitors[2].signed_in().await, "idle, but not too long");
    // That use counts: the idle clock starts again.
    let seen: Vec<(i64,)> = app
        .rows(&format!(
            "SELECT seen_ms FROM console_sessions WHERE id_hash = '{}'",
            id_hash(&visitors[2])
        ))
        .await;
    assert!(seen[0].0 >= now, "seen {} before {now}", seen[0].0);
    app.stop().await;
}

/// The change form's fields, with `csrf` when given.
fn change_form<'a>(
    csrf: Option<&'a str>,
    phone: &'a str,
    reason: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut form = vec![
        ("phoneNumber", phone),
        ("organizationId", "org_1"),
        ("consent", "out"),
        ("reason", reason),
    ];
    if let Some(csrf) = csrf {
        form.push(("csrf", csrf));
    }
    form
}

on_both_backends!(a_change_needs_the_sessions_form_token_and_is_recorded_under_the_tokens_name);
async fn a_change_needs_the_sessions_form_token_and_is_recorded_under_the_tokens_name(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_tokens(&[COMPLIANCE])).await else {
        return;
    };
    let phone = "+15550004444";
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(COMPLIANCE_TOKEN).await;
    let csrf = visitor.csrf().await;
    let mut other = Visitor::new(&app);
    other.sign_in(COMPLIANCE_TOKEN).await;
    let others_csrf = other.csrf().await;
    assert_ne!(csrf, others_csrf, "each session has its own");

    let refused = [
        (None, Some(visitor.base.clone()), "security token"),
        (Some(""), Some(visitor.base.clone()), "security token"),
        (
            Some(others_csrf.as_str()),
            Some(visitor.base.clone()),
            "security token",
        ),
        (
            Some(csrf.as_str()),
            Some("https://evil.example".to_owned()),
            "another site",
        ),
        (Some(csrf.as_str()), Some("null".to_owned()), "another site"),
    ];
    for (form_token, origin, said) in refused {
        let response = visitor
            .post_from(
                origin.as_deref(),
                "/change",
                &change_form(form_token, phone, "asked by phone"),
            )
            .await;
        assert_eq!(response.status(), 403, "{form_token:?} from {origin:?}");
        let html = response.text().await.unwrap();
        assert!(html.contains(said), "{html}");
    }
    assert_eq!(ledger_entries(&app).await, 0);
    let consent: Value = app
        .http
        .get(app.admin_url("/v1/consent?phoneNumber=%2B15550004444"))
        .bearer_auth(COMPLIANCE_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(consent["items"], json!([]), "{consent}");

    // With it, from this listener (or from a client that sends no Origin).
    let response = visitor
        .post(
            "/change",
            &change_form(Some(&csrf), phone, "asked by phone, ref 2231"),
        )
        .await;
    let href = location(&response);
    let seq = app.count("SELECT MAX(seq) FROM ledger").await;
    assert_eq!(
        href,
        format!("/?phoneNumber=%2B15550004444&recorded={seq}&current=true")
    );
    assert_eq!(ledger_entries(&app).await, 1);
    let bundle = evidence_of(&app, COMPLIANCE_TOKEN, phone).await;
    let item = &bundle["items"][0];
    assert_eq!(
        (item["source"].as_str(), item["optedOut"].as_bool()),
        (Some("local"), Some(true)),
        "{item:#}"
    );
    assert_eq!(item["evidence"]["actor"], "compliance");
    assert_eq!(item["evidence"]["reason"], "asked by phone, ref 2231");
    let html = visitor.text(&href).await;
    assert!(
        html.contains(&format!("Recorded as ledger entry #{seq}")),
        "{html}"
    );
    assert!(
        html.contains("Opted out: changed here by compliance"),
        "{html}"
    );

    let response = visitor
        .post_from(
            None,
            "/change",
            &change_form(Some(&csrf), phone, "changed mind"),
        )
        .await;
    assert!(location(&response).contains("&recorded="));
    assert_eq!(ledger_entries(&app).await, 2);
    app.stop().await;
}

#[tokio::test]
async fn the_change_form_says_what_is_wrong_and_keeps_what_was_typed() {
    let app = spawn_app(with_admin_token).await;
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(ADMIN_TOKEN).await;
    let csrf = visitor.csrf().await;

    let response = visitor
        .post(
            "/change",
            &[
                ("csrf", &csrf),
                ("phoneNumber", "555 1234"),
                ("organizationId", "org_9"),
                ("consent", "in"),
                ("reason", "called <twice> & asked"),
            ],
        )
        .await;
    assert_eq!(response.status(), 400);
    let html = response.text().await.unwrap();
    assert!(html.contains("is not in E.164 form"), "{html}");
    assert!(html.contains(r#"value="555 1234""#), "{html}");
    assert!(html.contains(r#"value="org_9""#), "{html}");
    assert!(html.contains(r#"value="in" checked"#), "{html}");
    assert!(
        html.contains(&format!(
            ">{}</textarea>",
            escaped("called <twice> & asked")
        )),
        "{html}"
    );
    assert!(
        html.contains(r#"aria-describedby="phone-help change-error" aria-invalid="true""#),
        "{html}"
    );
    // The form token is still there, for the next try.
    assert_eq!(input_value(&html, "csrf"), csrf);

    for (phone, reason, consent, said) in [
        ("+15550001111", "   ", "out", "Reason: required"),
        ("+15550001111", "", "out", "Reason: required"),
        (
            "+15550001111",
            &"x".repeat(501),
            "out",
            "Reason: required, at most 500",
        ),
        (
            "+15550001111",
            "asked",
            "maybe",
            "Consent: choose opt out or opt in",
        ),
    ] {
        let response = visitor
            .post(
                "/change",
                &[
                    ("csrf", &csrf),
                    ("phoneNumber", phone),
                    ("organizationId", "org_9"),
                    ("consent", consent),
                    ("reason", reason),
                ],
            )
            .await;
        assert_eq!(response.status(), 400, "{reason:?} {consent:?}");
        let html = response.text().await.unwrap();
        assert!(html.contains(said), "{said}: {html}");
        assert!(html.contains(r#"value="+15550001111""#), "{html}");
    }
    let response = visitor
        .post(
            "/change",
            &[
                ("csrf", &csrf),
                ("phoneNumber", "+15550001111"),
                ("organizationId", " "),
                ("consent", "out"),
                ("reason", "asked"),
            ],
        )
        .await;
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("Organization: required.")
    );
    assert_eq!(ledger_entries(&app).await, 0);

    // The lookup form too.
    let response = visitor.get("/?phoneNumber=555%201234").await;
    assert_eq!(response.status(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("is not a number in E.164 form")
    );
    app.stop().await;
}

/// The outbox id of the delivery of event `id`.
async fn delivery_id(app: &TestApp, event: &str) -> i64 {
    app.count(&format!(
        "SELECT id FROM outbox WHERE dedup_key = 'event:{event}'"
    ))
    .await
}

on_both_backends!(a_quarantined_delivery_is_listed_with_its_reason_and_replayed_from_the_page);
async fn a_quarantined_delivery_is_listed_with_its_reason_and_replayed_from_the_page(
    backend: Backend,
) {
    let Some((app, visitor)) = signed_in_app(backend).await else {
        return;
    };
    assert!(
        visitor
            .text("/quarantine")
            .await
            .contains("Nothing is quarantined.")
    );

    // Signed and verified, but not to be applied: one never will be (its flag is not a
    // boolean), the other once its lead is known.
    let broken = json!({"type": "consentUpdate-v1", "id": "evt_broken", "createdAt": "2026-11-21T10:00:00Z",
                        "data": {"organizationId": "org_1", "phoneNumber": "+15550006666", "globalOptedOut": "yes"}});
    let by_lead = json!({"type": "consentUpdate-v1", "id": "evt_by_lead", "createdAt": "2026-11-21T10:30:00Z",
                         "data": {"id": "lead_a", "globalOptedOut": true}});
    for body in [&broken, &by_lead] {
        assert_eq!(app.post_signed(&body.to_string()).await.status(), 200);
    }
    app.drain().await;
    let broken_id = delivery_id(&app, "evt_broken").await;
    let by_lead_id = delivery_id(&app, "evt_by_lead").await;
    let html = visitor.text("/quarantine").await;
    assert!(html.contains("event:evt_broken"), "{html}");
    assert!(html.contains("event:evt_by_lead"), "{html}");
    assert!(html.contains("globalOptedOut"), "{html}");
    assert!(
        html.contains("lead lead_a is not in the mirror; replay after reconciliation"),
        "{html}"
    );
    assert!(html.contains(&format!(r#"action="/quarantine/{by_lead_id}/replay""#)));
    let csrf = input_value(&html, "csrf");

    // Without the form token: nothing happens.
    let replay = format!("/quarantine/{by_lead_id}/replay");
    let response = visitor.post(&replay, &[]).await;
    assert_eq!(response.status(), 403);
    let response = visitor
        .post_from(Some("https://evil.example"), &replay, &[("csrf", &csrf)])
        .await;
    assert_eq!(response.status(), 403);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE state = 'quarantined'")
            .await,
        2
    );

    // Replayed before its cause is mended: back in quarantine, and the page says so.
    let response = visitor
        .post(
            &format!("/quarantine/{broken_id}/replay"),
            &[("csrf", &csrf)],
        )
        .await;
    let href = location(&response);
    assert_eq!(
        href,
        format!("/quarantine?replayed={broken_id}&outcome=quarantined")
    );
    assert!(visitor.text(&href).await.contains(&format!(
        "Delivery #{broken_id} was replayed and failed again"
    )));

    // Its lead arrives; the replay applies it.
    let lead = json!({"type": "consentUpdate-v1", "id": "evt_lead_a", "createdAt": "2026-11-21T10:10:00Z",
                      "data": {"id": "lead_a", "type": "lead", "organizationId": "org_1", "phoneNumber": "+15550008888",
                               "activeGroupIds": [], "inactiveGroupIds": [], "customFields": {}, "tagIds": [],
                               "firstName": "Ada", "globalOptedOut": false, "createdAt": "2026-01-01T00:00:00Z"}});
    assert_eq!(app.post_signed(&lead.to_string()).await.status(), 200);
    app.drain().await;
    let response = visitor.post(&replay, &[("csrf", &csrf)]).await;
    let href = location(&response);
    assert_eq!(
        href,
        format!("/quarantine?replayed={by_lead_id}&outcome=applied")
    );
    let html = visitor.text(&href).await;
    assert!(
        html.contains(&format!("Delivery #{by_lead_id} was replayed and applied.")),
        "{html}"
    );
    assert!(!html.contains("event:evt_by_lead"), "{html}");
    assert!(html.contains("event:evt_broken"), "{html}");
    let html = visitor.text("/?phoneNumber=%2B15550008888").await;
    assert!(
        html.contains(r#"<span class="badge out">Opted out</span>"#),
        "{html}"
    );

    // Replayed again, or never quarantined: nothing to do, and said so.
    for id in [by_lead_id, 999_999] {
        let response = visitor
            .post(&format!("/quarantine/{id}/replay"), &[("csrf", &csrf)])
            .await;
        let href = location(&response);
        assert_eq!(href, format!("/quarantine?replayed={id}&outcome=gone"));
        assert!(visitor.text(&href).await.contains(&format!(
            "Delivery #{id} is no longer quarantined; nothing was replayed."
        )));
    }
    app.stop().await;
}

fn assert_protected(response: &Response, what: &str) {
    let headers = response.headers();
    let csp = headers
        .get("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"))
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'none'"), "{what}: {csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{what}: {csp}");
    assert_eq!(headers["x-frame-options"], "DENY", "{what}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{what}");
    let referrer = headers["referrer-policy"].to_str().unwrap();
    assert!(
        ["no-referrer", "same-origin"].contains(&referrer),
        "{what}: no address of the console for other sites, not {referrer}"
    );
}

#[tokio::test]
async fn every_answer_forbids_framing_scripts_and_caching_and_the_stylesheet_needs_no_session() {
    let app = spawn_app(with_admin_token).await;
    assert_eq!(
        app.post_signed(&consent_event("evt_h", "+15550001111", true))
            .await
            .status(),
        200
    );
    let mut visitor = Visitor::new(&app);
    let signin = visitor.get("/signin").await;
    assert_protected(&signin, "the sign-in page");
    assert_eq!(signin.headers()["cache-control"], "no-store");
    let redirect = visitor.get("/status").await;
    assert_protected(&redirect, "a redirect to sign in");
    visitor.sign_in(ADMIN_TOKEN).await;
    let csrf = visitor.csrf().await;

    for path in [
        "/",
        "/?phoneNumber=%2B15550001111",
        "/status",
        "/quarantine",
        "/change",
        "/evidence?phoneNumber=%2B15550001111",
        "/evidence?phoneNumber=%2B15559999999",
    ] {
        let response = visitor.get(path).await;
        assert_protected(&response, path);
        assert_eq!(response.headers()["cache-control"], "no-store", "{path}");
        let body = response.text().await.unwrap();
        assert!(!body.contains("<script"), "{path}: {body}");
    }
    let refused = visitor.post("/change", &[]).await;
    assert_eq!(refused.status(), 403);
    assert_protected(&refused, "a refused form");
    assert_eq!(refused.headers()["cache-control"], "no-store");
    let signout = visitor.post("/signout", &[("csrf", &csrf)]).await;
    assert_protected(&signout, "sign-out");

    // The stylesheet, for anyone (the sign-in page needs it), cached for a while.
    let css = Visitor::new(&app).get("/assets/console.css").await;
    assert_eq!(css.status(), 200);
    assert_protected(&css, "the stylesheet");
    assert!(
        css.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css"),
        "{:?}",
        css.headers()["content-type"]
    );
    assert_ne!(css.headers()["cache-control"], "no-store");
    assert!(css.text().await.unwrap().contains('{'));
    app.stop().await;
}

on_both_backends!(the_evidence_of_a_number_downloads_with_the_delivery_as_received);
async fn the_evidence_of_a_number_downloads_with_the_delivery_as_received(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let phone = "+15550005555";
    // A field the service may add, with what a page must not take for markup.
    let body = json!({"type": "consentUpdate-v1", "id": "evt_stop", "createdAt": "2026-11-21T10:00:00Z",
                      "data": {"organizationId": "org_1", "phoneNumber": phone, "globalOptedOut": true,
                               "note": "<b>STOP</b> & \"don't\""}})
    .to_string();
    assert_eq!(app.post_signed(&body).await.status(), 200);
    app.drain().await;
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(ADMIN_TOKEN).await;

    let response = visitor.get("/evidence?phoneNumber=%2B15550005555").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(
        response.headers()["content-disposition"],
        r#"attachment; filename="evidence-15550005555.json""#
    );
    let bundle: Value = response.json().await.expect("JSON");
    assert_eq!(bundle["phoneNumber"], phone);
    let item = &bundle["items"][0];
    assert_eq!(item["optedOut"], true);
    let delivered = STANDARD
        .decode(item["evidence"]["bodyBase64"].as_str().expect("bodyBase64"))
        .expect("base64");
    assert_eq!(delivered, body.as_bytes(), "the bytes as delivered");
    let api = evidence_of(&app, ADMIN_TOKEN, phone).await;
    assert_eq!(bundle["items"], api["items"], "the bundle the API gives");

    let unknown = visitor.get("/evidence?phoneNumber=%2B15559999999").await;
    assert_eq!(unknown.status(), 404);
    let malformed = visitor.get("/evidence?phoneNumber=5555").await;
    assert_eq!(malformed.status(), 400);

    let html = visitor.text("/?phoneNumber=%2B15550005555").await;
    assert!(
        html.contains(r#"<span class="badge out">Opted out</span>"#),
        "{html}"
    );
    assert!(
        html.contains("Opted out: announced by the service&#39;s webhook"),
        "{html}"
    );
    assert!(
        html.contains(r#"href="/evidence?phoneNumber=%2B15550005555""#),
        "{html}"
    );
    // The body, indented (its fields one a line) and escaped.
    for line in [
        r#"  "type": "consentUpdate-v1""#,
        r#"    "globalOptedOut": true,"#,
        r#"    "note": "<b>STOP</b> & \"don't\"","#,
        r#"    "phoneNumber": "+15550005555""#,
    ] {
        assert!(
            html.contains(&format!("\n{}", escaped(line))),
            "{line}: {html}"
        );
    }
    assert!(!html.contains("<b>STOP</b>"), "{html}");
    let html = visitor.text("/?phoneNumber=%2B15559999999").await;
    assert!(
        html.contains("The ledger has no entry for +15559999999"),
        "{html}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_session_is_no_api_credential_and_a_token_opens_no_page() {
    let Some((app, visitor)) = signed_in_app(Backend::Sqlite).await else {
        unreachable!("SQLite is always there");
    };
    assert!(visitor.signed_in().await);
    for path in ["/v1/status", "/v1/consent?phoneNumber=%2B15550001111"] {
        let response = visitor.get(path).await;
        assert_eq!(response.status(), 401, "{path}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    // The token itself as a bearer: the API answers it, the console wants a session.
    assert_eq!(app.admin_get("/v1/status").await.status(), 200);
    let response = Visitor::new(&app)
        .http
        .get(app.admin_url("/status"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(location(&response), "/signin?next=/status");
    app.stop().await;
}

on_both_backends!(the_status_page_charts_the_deliveries_of_the_last_hour);
async fn the_status_page_charts_the_deliveries_of_the_last_hour(backend: Backend) {
    let Some((app, visitor)) = signed_in_app(backend).await else {
        return;
    };
    assert!(
        visitor
            .text("/status")
            .await
            .contains("0 deliveries in the last hour; at most 0 in a minute.")
    );
    for i in 0..4 {
        let body = consent_event(&format!("evt_{i}"), &format!("+1555000000{i}"), true);
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    app.drain().await;
    // The first came two hours ago: not in the chart.
    let earlier = codec::timestamp(Utc::now() - chrono::Duration::hours(2));
    app.execute(&format!(
        "UPDATE outbox SET received_at = '{earlier}' WHERE dedup_key = 'event:evt_0'"
    ))
    .await;
    let html = visitor.text("/status").await;
    assert!(
        html.contains(">3 deliveries in the last hour; at most "),
        "{html}"
    );
    let bars = html.matches("<rect ").count();
    assert_eq!(bars, 60, "a bar a minute");
    app.stop().await;
}

#[tokio::test]
async fn without_a_token_configured_the_sign_in_page_says_no_one_can_sign_in() {
    let app = spawn_app(|s| s.admin.tokens = Vec::new()).await;
    let mut visitor = Visitor::new(&app);
    let page = visitor.text("/signin").await;
    assert!(page.contains("No admin token is configured"), "{page}");
    let response = visitor.sign_in_answer("anything").await;
    assert_eq!(response.status(), 401);
    assert!(visitor.cookie(SESSION_COOKIE).is_none());
    app.stop().await;
}

#[tokio::test]
async fn a_subscriber_waiting_out_a_backoff_is_tried_now_from_the_status_page() {
    use crate::receiver::{Receiver, Reply, SUBSCRIBER_SECRET};
    let receiver =
        Receiver::start([Reply::TooManyRequests(600), Reply::TooManyRequests(600)]).await;
    let url = receiver.url();
    let Some(app) = spawn_app_on(Backend::Sqlite, |settings| {
        with_admin_token(settings);
        settings
            .subscriber
            .push(outreach_sync::settings::SubscriberSettings::new(
                "crm",
                &url,
                SUBSCRIBER_SECRET,
            ));
    })
    .await
    else {
        return;
    };
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(ADMIN_TOKEN).await;
    let event = crate::common::consent_event("evt_try", "+15550009901", true);
    assert_eq!(app.post_signed(&event).await.status(), 200);
    receiver
        .wait_for(std::time::Duration::from_secs(20), |r| r.len() == 1)
        .await;
    let html = crate::common::eventually(
        "the status page shows the subscriber retrying",
        std::time::Duration::from_secs(20),
        async || {
            let html = visitor.text("/status").await;
            html.contains(r#"action="/subscribers/crm/retry""#)
                .then_some(html)
        },
    )
    .await;
    let csrf = input_value(&html, "csrf");

    // Without the session's form token: refused, and nothing is tried.
    let refused = visitor.post("/subscribers/crm/retry", &[]).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(receiver.received().len(), 1);

    let response = visitor
        .post("/subscribers/crm/retry", &[("csrf", &csrf)])
        .await;
    let href = location(&response);
    assert_eq!(href, "/status?retried=crm");
    assert_eq!(receiver.received().len(), 2, "tried at once");
    assert!(
        visitor
            .text(&href)
            .await
            .contains("Subscriber crm was tried now")
    );
    app.stop().await;
}

#[tokio::test]
async fn the_status_page_shows_the_last_check_of_the_webhook_registrations() {
    let Some((app, visitor)) = signed_in_app(Backend::Sqlite).await else {
        return;
    };
    assert!(
        visitor
            .text("/status")
            .await
            .contains("Never checked: <code>outreach-sync webhooks check</code>")
    );
    let mut check = outreach_sync::model::RegistrationCheck {
        checked_at: outreach_sync::model::Timestamp::now(),
        ok: false,
        problems: vec![
            "no messageStatus-v1 registration targets https://hooks.example.org/webhooks".into(),
        ],
        target_url: "https://hooks.example.org/webhooks".into(),
    };
    outreach_sync::registrations::record(&app.pool, &check)
        .await
        .expect("kept");
    let html = visitor.text("/status").await;
    assert!(
        html.contains("found 1 problem with the registrations"),
        "{html}"
    );
    assert!(
        html.contains(
            "<li>no messageStatus-v1 registration targets https://hooks.example.org/webhooks</li>"
        ),
        "{html}"
    );
    check.ok = true;
    check.problems.clear();
    outreach_sync::registrations::record(&app.pool, &check)
        .await
        .expect("kept");
    let html = visitor.text("/status").await;
    assert!(
        html.contains("Both registrations target <code>https://hooks.example.org/webhooks</code>"),
        "{html}"
    );
    app.stop().await;
}

impl Visitor {
    /// The Import page's upload of `list` as `file_name`, with `fields`.
    async fn upload(
        &self,
        csrf: &str,
        file_name: &str,
        list: &str,
        fields: &[(&str, &str)],
    ) -> Response {
        let part = reqwest::multipart::Part::text(list.to_owned())
            .file_name(file_name.to_owned())
            .mime_str("text/csv")
            .expect("a part");
        let mut form = reqwest::multipart::Form::new()
            .text("csrf", csrf.to_owned())
            .part("list", part);
        for (name, value) in fields {
            form = form.text(name.to_string(), value.to_string());
        }
        self.with_cookies(self.http.post(format!("{}/import", self.base)))
            .header("origin", self.base.clone())
            .multipart(form)
            .send()
            .await
            .expect("POST /import")
    }
}

on_both_backends!(an_uploaded_list_is_previewed_and_recorded_only_once_confirmed);
async fn an_uploaded_list_is_previewed_and_recorded_only_once_confirmed(backend: Backend) {
    let Some((app, visitor)) = signed_in_app(backend).await else {
        return;
    };
    let csrf = visitor.csrf().await;
    let list = "phone;name\n(555) 010-7001;Ann\n555.010.7002;Bob\nnot a number;Cy\n";
    let organization = [("scope", "organization"), ("organizationId", "org_1")];
    let reason = ("reason", "export of the old platform");

    let refused = visitor
        .upload(
            &csrf,
            "old.csv",
            list,
            &[organization[0], organization[1], reason],
        )
        .await;
    assert_eq!(refused.status(), 400);
    let html = refused.text().await.expect("a page");
    assert!(html.contains("id=\"invalid-rows\""), "{html}");
    assert!(
        html.contains("<td>4</td><td><code>not a number</code>"),
        "{html}"
    );

    let forged = visitor
        .upload(
            "not-the-token",
            "old.csv",
            list,
            &[organization[0], organization[1], reason],
        )
        .await;
    assert_eq!(forged.status(), 403);

    let previewed = visitor
        .upload(
            &csrf,
            "old.csv",
            list,
            &[
                organization[0],
                organization[1],
                reason,
                ("skipInvalid", "true"),
            ],
        )
        .await;
    assert_eq!(previewed.status(), 200);
    let html = previewed.text().await.expect("a page");
    assert!(
        html.contains("<dd id=\"preview-recorded\">2</dd>"),
        "{html}"
    );
    assert_eq!(ledger_entries(&app).await, 0, "a preview records nothing");
    let id = input_value(&html, "id");

    let confirmed = visitor
        .post("/import/confirm", &[("csrf", &csrf), ("id", &id)])
        .await;
    assert_eq!(confirmed.status(), 200);
    let html = confirmed.text().await.expect("a page");
    assert!(html.contains("id=\"import-done\""), "{html}");
    assert_eq!(ledger_entries(&app).await, 2);
    let evidence = app
        .texts("SELECT CAST(evidence AS TEXT) FROM ledger ORDER BY seq")
        .await;
    let first: Value = serde_json::from_str(&evidence[0]).expect("JSON");
    assert_eq!(first["file"], "old.csv");
    assert_eq!(first["actor"], "token-1");

    let again = visitor
        .post("/import/confirm", &[("csrf", &csrf), ("id", &id)])
        .await;
    assert_eq!(again.status(), 400, "a preview is confirmed once");
    assert_eq!(ledger_entries(&app).await, 2);
    app.stop().await;
}

#[tokio::test]
async fn with_several_accounts_a_change_is_recorded_in_the_account_chosen_and_lookups_say_each_account()
 {
    let Some(app) = spawn_app_on(Backend::Sqlite, |settings| {
        with_admin_token(settings);
        settings.account = vec![
            crate::accounts::unreachable_account("party"),
            crate::accounts::unreachable_account("candidate"),
        ];
    })
    .await
    else {
        return;
    };
    let mut visitor = Visitor::new(&app);
    visitor.sign_in(ADMIN_TOKEN).await;
    let html = visitor
        .text("/change?phoneNumber=%2B15550001111&organizationId=org_1&accountId=candidate")
        .await;
    assert!(
        html.contains(r#"<select id="accountId" name="accountId""#),
        "{html}"
    );
    assert!(
        html.contains(r#"<option value="candidate" selected>"#),
        "{html}"
    );

    let csrf = visitor.csrf().await;
    let mut form = change_form(Some(&csrf), "+15550001111", "asked by phone");
    form.push(("accountId", "nobody"));
    let refused = visitor.post("/change", &form).await;
    assert_eq!(refused.status(), 400);
    let html = refused.text().await.expect("a page");
    assert!(html.contains("Account:"), "{html}");
    assert_eq!(ledger_entries(&app).await, 0);

    let mut form = change_form(Some(&csrf), "+15550001111", "asked by phone");
    form.push(("accountId", "candidate"));
    let response = visitor.post("/change", &form).await;
    assert!(location(&response).contains("recorded="), "{response:?}");
    let accounts: Vec<(String,)> = app.rows("SELECT account_id FROM ledger").await;
    assert_eq!(accounts, [("candidate".to_owned(),)]);

    let html = visitor.text("/?phoneNumber=%2B15550001111").await;
    assert!(html.contains(r#"<th scope="col">Account</th>"#), "{html}");
    assert!(html.contains("<td>candidate</td>"), "{html}");
    assert!(
        html.contains("accountId=candidate"),
        "the change link keeps the account: {html}"
    );
    app.stop().await;
}
