//! What every test of the fakes shares: a sandbox, a client that follows no redirect, and
//! requests to each fake (BigQuery's with a JWT signed by the test service account's key).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use outreach_sync_sandbox::destinations::BIGQUERY_SCOPE;
use outreach_sync_sandbox::{
    BIGQUERY_TEST_CLIENT_EMAIL, BIGQUERY_TEST_KEY, DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY,
    RunningSandbox, Sandbox, SandboxConfig,
};
use serde_json::{Value, json};

pub(crate) struct Fakes {
    pub sandbox: RunningSandbox,
    pub http: reqwest::Client,
}

/// The answer, its body as JSON (null when empty) and its headers.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

pub(crate) fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

impl Fakes {
    pub(crate) async fn start(config: SandboxConfig) -> Fakes {
        let sandbox = Sandbox::spawn(config).await.expect("sandbox starts");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Fakes { sandbox, http }
    }

    pub(crate) async fn default() -> Fakes {
        Self::start(SandboxConfig::default()).await
    }

    pub(crate) async fn answer(request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("a body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::String("<not JSON>".into()))
        };
        Answer {
            status,
            body,
            headers,
        }
    }

    /// A VAN request with `authorization` as given (none when `None`).
    pub(crate) fn van_request(
        &self,
        method: reqwest::Method,
        path: &str,
        authorization: Option<String>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.sandbox.van_url()));
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        request
    }

    pub(crate) async fn van_get_as(&self, path: &str, key: &str) -> Answer {
        let auth = basic("outreach-sync", &format!("{key}|1"));
        Self::answer(self.van_request(reqwest::Method::GET, path, Some(auth))).await
    }

    pub(crate) async fn van_get(&self, path: &str) -> Answer {
        self.van_get_as(path, DEFAULT_VAN_KEY).await
    }

    pub(crate) async fn van_post_as(&self, path: &str, key: &str, body: Value) -> Answer {
        let auth = basic("outreach-sync", &format!("{key}|1"));
        Self::answer(
            self.van_request(reqwest::Method::POST, path, Some(auth))
                .json(&body),
        )
        .await
    }

    pub(crate) async fn van_post(&self, path: &str, body: Value) -> Answer {
        self.van_post_as(path, DEFAULT_VAN_KEY, body).await
    }

    /// The id of a result code or contact type of the committee of `key`, by name.
    pub(crate) async fn van_id_of(&self, key: &str, list: &str, name: &str) -> u64 {
        let (path, field) = match list {
            "resultCodes" => ("/canvassResponses/resultCodes", "resultCodeId"),
            _ => ("/canvassResponses/contactTypes", "contactTypeId"),
        };
        let answer = self.van_get_as(path, key).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer
            .body
            .as_array()
            .expect("a list")
            .iter()
            .find(|item| item["name"] == name)
            .and_then(|item| item[field].as_u64())
            .unwrap_or_else(|| panic!("{name} in {list}: {}", answer.body))
    }

    /// A seeded person's VAN ID and national number.
    pub(crate) fn a_van_person(&self) -> (u64, String) {
        let truth = self.sandbox.van_truth();
        let person = truth.people.first().expect("seeded VAN people");
        (person.van_id, person.phones[0].phone_number.clone())
    }

    pub(crate) async fn an_post(&self, token: Option<&str>, body: Value) -> Answer {
        let mut request = self
            .http
            .post(format!("{}/people", self.sandbox.action_network_url()));
        if let Some(token) = token {
            request = request.header("OSDI-API-Token", token);
        }
        Self::answer(request.json(&body)).await
    }

    pub(crate) async fn an_signup(&self, number: &str, status: &str) -> Answer {
        self.an_post(
            Some(DEFAULT_ACTION_NETWORK_KEY),
            json!({"person": {"phone_numbers": [{"number": number, "number_type": "Mobile", "status": status}]}}),
        )
        .await
    }

    pub(crate) async fn control(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let mut request = self.http.request(
            method,
            format!("{}/_control{path}", self.sandbox.base_url()),
        );
        if let Some(body) = body {
            request = request.json(&body);
        }
        Self::answer(request).await
    }
}

/// A canvass response as the daemon sends it.
pub(crate) fn do_not_text(result_code: u64, contact_type: u64, phone: &str) -> Value {
    json!({
        "canvassContext": {
            "contactTypeId": contact_type,
            "inputTypeId": 11,
            "dateCanvassed": "2026-11-26T12:00:00Z",
            "phone": {"dialingPrefix": "1", "phoneNumber": phone}
        },
        "resultCodeId": result_code,
        "responses": null
    })
}

pub(crate) fn first_error(answer: &Answer) -> &Value {
    &answer.body["errors"][0]
}

pub(crate) fn properties(answer: &Answer) -> Vec<String> {
    answer.body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["properties"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect()
}

/// The private key of the test service account, from its key file.
pub(crate) fn bigquery_private_key() -> String {
    let key: Value = serde_json::from_str(BIGQUERY_TEST_KEY).expect("the key file is JSON");
    key["private_key"]
        .as_str()
        .expect("a private key")
        .to_owned()
}

/// A key pair no account has until a test registers it.
pub(crate) const OTHER_KEY: &str = include_str!("../../testdata/bigquery-other-key.pem");

/// See [`OTHER_KEY`].
pub(crate) const OTHER_PUBLIC_KEY: &str = include_str!("../../testdata/bigquery-other-key.pub.pem");

/// Seconds since the epoch.
pub(crate) fn now_secs() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(now.expect("after 1970").as_secs()).expect("in range")
}

/// A JWT signed RS256 with `private_pem`, its claims the test account's for the sandbox
/// (`iss`, `scope`, `aud`, `iat` now, `exp` in an hour) with `changes` over them (a null
/// removes a claim).
pub(crate) fn bigquery_assertion(private_pem: &str, changes: Value) -> String {
    let now = now_secs();
    let mut claims = json!({
        "iss": BIGQUERY_TEST_CLIENT_EMAIL,
        "scope": BIGQUERY_SCOPE,
        // Google's token endpoint, as Google documents every assertion's audience, wherever
        // it is posted.
        "aud": "https://oauth2.googleapis.com/token",
        "iat": now,
        "exp": now + 3600,
    });
    for (name, value) in changes.as_object().into_iter().flatten() {
        match value {
            Value::Null => claims.as_object_mut().map(|c| c.remove(name)),
            other => claims
                .as_object_mut()
                .map(|c| c.insert(name.clone(), other.clone())),
        };
    }
    let key = EncodingKey::from_rsa_pem(private_pem.as_bytes()).expect("an RSA key");
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key).expect("signed")
}

impl Fakes {
    /// `POST /bigquery/oauth2/token` with a form of `fields`.
    pub(crate) async fn bq_grant_form(&self, fields: &[(&str, &str)]) -> Answer {
        Self::answer(
            self.http
                .post(self.sandbox.bigquery_token_url())
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(form(fields)),
        )
        .await
    }

    /// The JWT bearer grant of `assertion`.
    pub(crate) async fn bq_grant(&self, assertion: &str) -> Answer {
        self.bq_grant_form(&[
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", assertion),
        ])
        .await
    }

    /// An access token of the test account.
    pub(crate) async fn bq_token(&self) -> String {
        let assertion = bigquery_assertion(&bigquery_private_key(), json!({}));
        let answer = self.bq_grant(&assertion).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body["access_token"]
            .as_str()
            .expect("a token")
            .to_owned()
    }

    /// A request to `/bigquery/v2{path}` with `token` as its bearer (none when `None`).
    pub(crate) async fn bq(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let url = format!("{}{path}", self.sandbox.bigquery_url());
        let mut request = self.http.request(method, url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        Self::answer(request).await
    }

    /// Creates `table` in `sandbox-project:consent` with these fields; the answer.
    pub(crate) async fn bq_create_table(&self, token: &str, table: &str, fields: Value) -> Answer {
        let body = json!({
            "tableReference":
                {"projectId": "sandbox-project", "datasetId": "consent", "tableId": table},
            "schema": {"fields": fields},
        });
        self.bq(
            reqwest::Method::POST,
            CONSENT_TABLES,
            Some(token),
            Some(body),
        )
        .await
    }
}

/// The tables of the default dataset, under `/bigquery/v2`.
pub(crate) const CONSENT_TABLES: &str = "/projects/sandbox-project/datasets/consent/tables";

/// `application/x-www-form-urlencoded` of `fields`.
fn form(fields: &[(&str, &str)]) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The first error of a Google error body: `error.errors[0]`.
pub(crate) fn google_error(answer: &Answer) -> &Value {
    &answer.body["error"]["errors"][0]
}
