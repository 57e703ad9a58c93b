//! `/mobile_commons/api`: Upland Mobile Commons' REST API (the texting platform campaigns keep
//! their subscribers in), as a source the daemon reads profiles from and a destination it
//! opts numbers out in. Its controls: `control.rs`; its listing: `listing.rs`.
//!
//! Written from Mobile Commons' public API reference (Upland's "Mobile Commons: Rest API"
//! article and the earlier `mobilecommons.com/mobile-commons-api/rest` page: HTTP Basic with
//! the login email and password, `<response success="...">` envelopes, List All Profiles with
//! `from`, `to`, `limit` and `page`) and from clients of it (Parsons' `mobilecommons`
//! connector, which pages with `page` and `limit` at most 1000 and stops at a page whose
//! `num` is 0; Parsons' older `profile_opt_out(phone_number, campaign_id, subscription_id)`
//! and the answers its tests hold; other clients' recorded answers). What is followed, and
//! where the fake goes further:
//!
//! - Every answer is XML (`application/xml; charset=utf-8`): `<response success="true">` and
//!   the payload, or `<response success="false"><error id="N" message="..."/></response>`,
//!   **with HTTP 200**, as Mobile Commons answers its errors. The one id the fake uses for
//!   the calls it serves is the one recorded for them: `5` `Invalid phone number` (a number
//!   no profile holds, or not a number). An unreadable `from` or `to` is the fake's own
//!   `<error id="0" message="Invalid date: from"/>` (no id is documented for it).
//! - The credential: the login as HTTP Basic, or the company's API token as `Authorization:
//!   Bearer` (Upland's article says a company whose logins moved to its credential manager
//!   uses a bearer token, and Parsons' `mobilecommons` sends its key so).
//! - A missing or wrong credential is **401** with `WWW-Authenticate: Basic
//!   realm="Application"` and the text body `HTTP Basic: Access denied.` (what the Rails
//!   application Mobile Commons is answers by default; not in the documents, which only say
//!   the credentials are the login's). Not XML: a client must look at the status first.
//! - A profile: `<profile id>` with `first_name`, `last_name`, `phone_number` (digits with
//!   the country code, no `+`: `15555550100`), `email`, `status` ([`STATUSES`]),
//!   `created_at`, `updated_at`, `opted_out_at` (`2026-11-28 07:05:28 UTC`, or empty),
//!   `opted_out_source` (or empty), `<source type name email/>`, `address` (`street1`,
//!   `street2`, `city`, `state`, `postal_code`, `country`), `custom_columns`,
//!   `subscriptions` (`<subscription campaign_id campaign_name campaign_description
//!   opt_in_path_id status opt_in_source created_at activated_at opted_out_at
//!   opt_out_source/>`, times `2026-11-28T07:05:28Z`), `integrations`, `clicks`. The
//!   `location` and `districts` Mobile Commons geocodes are not served.
//! - One campaign, [`MOBILE_COMMONS_CAMPAIGN_ID`]: each profile has one subscription to it,
//!   `Active` or `Opted-Out`.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::FakesState;
use super::faults::FakeRequestCounts;
pub(crate) use super::numbers::digits;
use crate::wire::Lead;

/// Its test controls under `/_control/mobile_commons`.
mod control;
/// `GET /profiles` and `POST /profile_opt_out`.
mod listing;
/// What it holds, and what changes it.
mod state;

pub(super) use control::routes as control_routes;
pub use listing::{
    DEFAULT_LIMIT as MOBILE_COMMONS_DEFAULT_LIMIT, MAX_LIMIT as MOBILE_COMMONS_MAX_LIMIT,
};

/// `status`: subscribed to at least one campaign; texts reach the number.
pub const ACTIVE_SUBSCRIBER: &str = "Active Subscriber";
/// `status`: the profile is subscribed to no campaign (none yet, or every subscription opted
/// out, by the API or by staff). Older answers word it `No Subscriptions`.
pub const NO_SUBSCRIPTIONS: &str = "Profiles with no Subscriptions";
/// `status`, the older wording of [`NO_SUBSCRIPTIONS`].
pub const NO_SUBSCRIPTIONS_OLD: &str = "No Subscriptions";
/// `status`: the person texted STOP (or another stop word): opted out of every campaign.
pub const TEXTED_STOP: &str = "Texted a STOP word";
/// `status`: the number cannot receive texts (a landline, a carrier that refuses them).
pub const UNDELIVERABLE: &str = "Undeliverable";
/// `status`: the carrier said the number is not a valid mobile number.
pub const HARD_BOUNCE: &str = "Hard bounce";

/// The profile statuses Mobile Commons serves, with what each means:
///
/// | status | meaning | opted out? |
/// |---|---|---|
/// | `Active Subscriber` | subscribed to at least one campaign | no |
/// | `Profiles with no Subscriptions` (older: `No Subscriptions`) | subscribed to none: never, or every subscription opted out (by `profile_opt_out`, or by staff) | no consent to text: yes |
/// | `Texted a STOP word` | the person texted STOP | yes |
/// | `Undeliverable` | the number cannot receive texts | cannot be texted |
/// | `Hard bounce` | not a valid mobile number | cannot be texted |
///
/// A profile opted out also carries `opted_out_at` and `opted_out_source` (`Texted a STOP
/// word`, [`OPT_OUT_FROM_API`], ...), which stay when the status is `Undeliverable`.
pub const STATUSES: [&str; 6] = [
    ACTIVE_SUBSCRIBER,
    NO_SUBSCRIPTIONS,
    NO_SUBSCRIPTIONS_OLD,
    TEXTED_STOP,
    UNDELIVERABLE,
    HARD_BOUNCE,
];

/// `opted_out_source` (and a subscription's `opt_out_source`) after `profile_opt_out`.
pub const OPT_OUT_FROM_API: &str = "Opt-out from API";

/// A subscription's `status` while the number gets the campaign's texts.
pub const SUBSCRIPTION_ACTIVE: &str = "Active";
/// A subscription's `status` once opted out.
pub const SUBSCRIPTION_OPTED_OUT: &str = "Opted-Out";

/// The one campaign of the fake, every profile's one subscription.
pub const MOBILE_COMMONS_CAMPAIGN_ID: u64 = 181_818;
/// Its name.
const CAMPAIGN_NAME: &str = "Sandbox Campaign";
/// The opt-in path the seeded profiles joined by.
const OPT_IN_PATH_ID: u64 = 272_727;

/// The first profile's `id`; the next profiles follow it.
const FIRST_PROFILE_ID: u64 = 338_000_001;
/// A profile's subscription id is its `id` plus this.
const SUBSCRIPTION_ID_OFFSET: u64 = 100_000_000;

/// The error id of `Invalid phone number`.
pub const INVALID_PHONE_NUMBER_ID: u32 = 5;
/// Its message.
pub const INVALID_PHONE_NUMBER: &str = "Invalid phone number";

/// XML text or attribute value, `&`, `<`, `>`, `"` and `'` escaped. Other characters are
/// written as they are, control characters included (a hostile status makes the page
/// ill-formed XML, as a system that does not check what it stores would serve it).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// An XML answer with `status`: the declaration, then `body`.
pub(crate) fn xml(status: StatusCode, body: &str) -> Response {
    let text = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}\n");
    (
        status,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        text,
    )
        .into_response()
}

/// `<response success="false"><error id message/></response>`, with `status` (200 for
/// Mobile Commons' own errors, another for an injected one).
pub(crate) fn error(status: StatusCode, id: u32, message: &str) -> Response {
    let body = format!(
        "<response success=\"false\">\n  <error id=\"{id}\" message=\"{}\"/>\n</response>",
        escape(message)
    );
    xml(status, &body)
}

/// A time as the profile's elements write it: `2026-11-28 07:05:28 UTC`.
pub(crate) fn element_time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A time as a subscription's attributes write it: `2026-11-28T07:05:28Z`.
fn attribute_time(at: &DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A profile's subscription to the one campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobileCommonsSubscription {
    /// The subscription's id (what `profile_opt_out` takes as `subscription_id`).
    pub id: u64,
    pub campaign_id: u64,
    pub campaign_name: String,
    pub opt_in_path_id: u64,
    /// `Active` or `Opted-Out`.
    pub status: String,
    pub opt_in_source: String,
    pub created_at: DateTime<Utc>,
    pub activated_at: DateTime<Utc>,
    pub opted_out_at: Option<DateTime<Utc>>,
    pub opt_out_source: Option<String>,
}

/// A profile as Mobile Commons serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobileCommonsProfile {
    pub id: u64,
    /// Empty when unknown.
    pub first_name: String,
    /// Empty when unknown.
    pub last_name: String,
    /// Digits with the country code (`15555550100`) for the seeded ones; anything for a
    /// hostile one.
    pub phone_number: String,
    /// Empty when unknown.
    pub email: String,
    /// One of [`STATUSES`], or anything for a hostile one.
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub opted_out_at: Option<DateTime<Utc>>,
    pub opted_out_source: Option<String>,
    /// `<source type>`: how the profile came (`API`, `Keyword`...).
    pub source_type: String,
    /// `<source name>`.
    pub source_name: String,
    /// The one address field the fake keeps; the others are served empty.
    pub postal_code: String,
    pub subscriptions: Vec<MobileCommonsSubscription>,
}

/// What a listing includes besides the profile's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Include {
    pub(crate) custom_columns: bool,
    pub(crate) subscriptions: bool,
    pub(crate) clicks: bool,
}

impl Include {
    /// Everything: what `profile_opt_out` answers with, and a listing by default.
    pub(crate) const ALL: Self = Self {
        custom_columns: true,
        subscriptions: true,
        clicks: true,
    };
}

impl MobileCommonsProfile {
    /// `<profile id="...">...</profile>`, indented by `indent` spaces.
    pub(crate) fn write_xml(&self, out: &mut String, indent: usize, include: Include) {
        let pad = " ".repeat(indent);
        let inner = " ".repeat(indent + 2);
        let element = |out: &mut String, name: &str, value: &str| {
            if value.is_empty() {
                out.push_str(&format!("{inner}<{name}/>\n"));
            } else {
                out.push_str(&format!("{inner}<{name}>{}</{name}>\n", escape(value)));
            }
        };
        out.push_str(&format!("{pad}<profile id=\"{}\">\n", self.id));
        element(out, "first_name", &self.first_name);
        element(out, "last_name", &self.last_name);
        element(out, "phone_number", &self.phone_number);
        element(out, "email", &self.email);
        element(out, "status", &self.status);
        element(out, "created_at", &element_time(&self.created_at));
        element(out, "updated_at", &element_time(&self.updated_at));
        let opted_out_at = self.opted_out_at.as_ref().map(element_time);
        element(out, "opted_out_at", opted_out_at.as_deref().unwrap_or(""));
        element(
            out,
            "opted_out_source",
            self.opted_out_source.as_deref().unwrap_or(""),
        );
        out.push_str(&format!(
            "{inner}<source type=\"{}\" name=\"{}\"/>\n",
            escape(&self.source_type),
            escape(&self.source_name)
        ));
        out.push_str(&format!("{inner}<address>\n"));
        let field = " ".repeat(indent + 4);
        for name in ["street1", "street2", "city", "state"] {
            out.push_str(&format!("{field}<{name}/>\n"));
        }
        if self.postal_code.is_empty() {
            out.push_str(&format!("{field}<postal_code/>\n"));
        } else {
            out.push_str(&format!(
                "{field}<postal_code>{}</postal_code>\n",
                escape(&self.postal_code)
            ));
        }
        out.push_str(&format!("{field}<country>US</country>\n"));
        out.push_str(&format!("{inner}</address>\n"));
        if include.custom_columns {
            out.push_str(&format!(
                "{inner}<custom_columns>\n{inner}</custom_columns>\n"
            ));
        }
        if include.subscriptions {
            out.push_str(&format!("{inner}<subscriptions>\n"));
            for s in &self.subscriptions {
                let opted_out_at = s.opted_out_at.as_ref().map(attribute_time);
                out.push_str(&format!(
                    "{field}<subscription campaign_id=\"{}\" campaign_name=\"{}\" campaign_description=\"\" \
                     opt_in_path_id=\"{}\" status=\"{}\" opt_in_source=\"{}\" created_at=\"{}\" \
                     activated_at=\"{}\" opted_out_at=\"{}\" opt_out_source=\"{}\"/>\n",
                    s.campaign_id,
                    escape(&s.campaign_name),
                    s.opt_in_path_id,
                    escape(&s.status),
                    escape(&s.opt_in_source),
                    attribute_time(&s.created_at),
                    attribute_time(&s.activated_at),
                    opted_out_at.unwrap_or_default(),
                    escape(s.opt_out_source.as_deref().unwrap_or("")),
                ));
            }
            out.push_str(&format!("{inner}</subscriptions>\n"));
        }
        out.push_str(&format!("{inner}<integrations>\n{inner}</integrations>\n"));
        if include.clicks {
            out.push_str(&format!("{inner}<clicks>\n{inner}</clicks>\n"));
        }
        out.push_str(&format!("{pad}</profile>\n"));
    }
}

/// One `profile_opt_out` call the fake answered, whatever it answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MobileCommonsOptOutCall {
    /// `phone_number`, as sent (empty when missing).
    pub phone_number: String,
    pub campaign_id: Option<String>,
    pub subscription_id: Option<String>,
    pub at: DateTime<Utc>,
    /// The profile opted out, if the call named one.
    pub profile_id: Option<u64>,
    /// The error id answered (`5`), if it was refused.
    pub error_id: Option<u32>,
}

/// Everything the Mobile Commons fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MobileCommonsTruth {
    /// In the order they were made (the listing's order).
    pub profiles: Vec<MobileCommonsProfile>,
    /// Every `profile_opt_out` received, in order.
    pub opt_out_calls: Vec<MobileCommonsOptOutCall>,
    /// Profile listings answered with `success="true"`.
    pub listings_served: u64,
    /// Hostile: pages past the last repeat the last one.
    pub endless: bool,
    pub requests: FakeRequestCounts,
}

/// The Mobile Commons fake's state.
pub(crate) struct MobileCommons {
    username: String,
    password: String,
    /// In `id` order, which is the listing's: a profile keeps its place when it changes, so a
    /// walk of 100,000 by `page` needs no sorting.
    profiles: Vec<MobileCommonsProfile>,
    /// A profile's index by its number's digits (however it was written): an opt-out finds
    /// its profile at once among 100,000.
    by_number: HashMap<String, usize>,
    /// The `id` of the next profile made.
    next_id: u64,
    opt_out_calls: Vec<MobileCommonsOptOutCall>,
    listings_served: u64,
    endless: bool,
    /// The API token taken as `Bearer` (empty: none).
    token: String,
}

/// What `Authorization` holds.
enum Credential {
    /// `Basic`: a login's user and password.
    Basic(String, String),
    /// `Bearer`: an API token.
    Bearer(String),
    /// Another scheme, or one that cannot be read.
    Unreadable,
}

/// The credential of the `Authorization` header, if there is one.
fn credential(headers: &HeaderMap) -> Option<Credential> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().unwrap_or("");
    let Some((scheme, given)) = value.split_once(' ') else {
        return Some(Credential::Unreadable);
    };
    if scheme.eq_ignore_ascii_case("Bearer") {
        return Some(Credential::Bearer(given.trim().to_owned()));
    }
    if !scheme.eq_ignore_ascii_case("Basic") {
        return Some(Credential::Unreadable);
    }
    let decoded = STANDARD
        .decode(given.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_default();
    let (user, password) = decoded.split_once(':').unwrap_or(("", ""));
    Some(Credential::Basic(user.to_owned(), password.to_owned()))
}

/// The 401 of a missing or wrong credential.
fn access_denied() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "HTTP Basic: Access denied.\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"Application\""),
    );
    response
}

/// The credentials must be the configured login's (HTTP Basic), or its API token (`Bearer`,
/// as a company whose logins moved to Upland's credential manager is reached, and as
/// Parsons' `mobilecommons` sends it): else 401.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = {
        let fake = fakes.mobile_commons();
        match credential(request.headers()) {
            Some(Credential::Basic(user, password)) => {
                !fake.username.is_empty() && user == fake.username && password == fake.password
            }
            Some(Credential::Bearer(token)) => !fake.token.is_empty() && token == fake.token,
            Some(Credential::Unreadable) | None => false,
        }
    };
    if allowed {
        next.run(request).await
    } else {
        access_denied()
    }
}

/// Any other path under `/mobile_commons/api`: 404, a text body.
pub(crate) async fn no_such_endpoint() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "Not Found\n",
    )
        .into_response()
}

/// The API, nested under `/mobile_commons/api` (behind [`auth`] and the faults).
pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/profiles", get(listing::list))
        .route("/profile_opt_out", post(listing::opt_out))
}

#[cfg(test)]
mod tests;
