//! Upland Mobile Commons, the broadcast texting tool, read back and written ([`Profiles`],
//! with the login as HTTP Basic, or the company's API token as a bearer). Read: the profiles updated since the watermark ([`OVERLAP`]
//! behind it) (`GET /profiles?from=&page=&limit=`), page by page until an empty one; a
//! profile that texted a STOP word, or was opted out by staff or an API and not subscribed
//! since, is an opt-out of its number. Written (`write.rs`): each opt-out as the profile's
//! (`POST /profile_opt_out`, every campaign), unless the profile is opted out already.
//!
//! Mobile Commons answers in XML: `<response success="true"><profiles num="N"
//! page="P"><profile id="...">...</profile></profiles></response>`, an error as
//! `<response success="false"><error id="5" message="..."/></response>` (with a 200), and a
//! login that does not work with a 401 whose body is text.

use chrono::{DateTime, NaiveDateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Pending;
use super::source::{
    Listed, ReadError, ReadRecord, Records, Said, Source, SourceApi, Window, number_code_first,
    read_listing,
};
use crate::settings::kinds::mobile_commons::MobileCommonsSettings;

/// How far behind the watermark a read starts: a profile updated in the second a read
/// ended (or listed late) is read again, and recorded once.
pub const OVERLAP: chrono::Duration = chrono::Duration::minutes(5);

/// Profiles a page asks for: the most Mobile Commons serves in one.
const LIMIT: u32 = 1_000;

/// A listing's query for one profile, without what a profile carries beside its status.
const ONE_PROFILE: &str =
    "limit=1&include_custom_columns=false&include_subscriptions=false&include_clicks=false";

/// The profile's `status` when it texted a STOP word: an opt-out.
pub const TEXTED_STOP: &str = "Texted a STOP word";
/// Subscribed to none: what an opt-out by staff or an API leaves (an `Active Subscriber`
/// subscribed again since, whatever its `opted_out_at` says, is texted again: nothing) (`No Subscriptions` in
/// older answers); an opt-out when `opted_out_at` says when.
pub const NO_SUBSCRIPTIONS: [&str; 2] = ["Profiles with no Subscriptions", "No Subscriptions"];

/// A company's profiles, read and written with its login (or its API token).
#[derive(Debug)]
pub struct Profiles {
    username: String,
    company: String,
    /// Reached with the company's API token as a bearer, not the login.
    bearer: bool,
}

impl Profiles {
    pub fn new(own: &MobileCommonsSettings) -> Self {
        Self {
            username: own.username.trim().to_owned(),
            company: own.company.trim().to_owned(),
            bearer: own.bearer(),
        }
    }

    /// `request` with `key` as Mobile Commons takes it: the login's password as HTTP Basic,
    /// or the API token as `Authorization: Bearer`.
    fn with_key(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        match self.bearer {
            true => request.bearer_auth(key.expose_secret()),
            false => request.basic_auth(&self.username, Some(key.expose_secret())),
        }
    }

    /// The listing's path of `query`, with the company when one is named.
    fn path(&self, query: &str) -> String {
        match self.company.as_str() {
            "" => format!("/profiles?{query}"),
            company => format!("/profiles?{query}&company={company}"),
        }
    }
}

/// `<response>`, as much of it as is read.
#[derive(Debug, Deserialize)]
struct Response {
    #[serde(rename = "@success", default)]
    success: String,
    #[serde(default)]
    profiles: Option<ProfilesPage>,
    #[serde(default)]
    error: Option<ErrorElement>,
}

/// `<error id="5" message="Invalid phone number"/>`.
#[derive(Debug, Deserialize)]
struct ErrorElement {
    #[serde(rename = "@id", default)]
    id: String,
    #[serde(rename = "@message", default)]
    message: String,
}

/// `<profiles num="N" page="P">`.
#[derive(Debug, Deserialize)]
struct ProfilesPage {
    #[serde(rename = "profile", default)]
    profiles: Vec<Profile>,
}

/// A `<profile>`: what is read of it, kept as the record's evidence.
#[derive(Debug, Default, Deserialize, Serialize)]
struct Profile {
    #[serde(rename(deserialize = "@id", serialize = "id"), default)]
    id: String,
    #[serde(default)]
    phone_number: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    updated_at: String,
    #[serde(default)]
    opted_out_at: String,
    #[serde(default)]
    opted_out_source: String,
}

/// Why an answer is not a `<response success="true">`.
#[derive(Debug)]
enum Unread {
    /// Not the XML expected: what the parser said.
    NotXml(String),
    /// `success="false"` (or another word): Mobile Commons' refusal, in its words.
    Refused(String),
}

/// The `<response>` of `text`, `what` naming it in errors: an answer of `success="false"` is
/// Mobile Commons' error, in its words.
fn parsed(text: &str, what: &str) -> Result<Response, Unread> {
    if !is_response(text) {
        return Err(Unread::NotXml(format!(
            "{what}: the answer is not Mobile Commons' <response>: {}",
            crate::model::text::bounded(text.trim(), 100)
        )));
    }
    let read: Response = quick_xml::de::from_str(text).map_err(|error| {
        Unread::NotXml(format!(
            "{what}: the answer is not the XML expected: {}",
            crate::model::text::bounded(&error.to_string(), 200)
        ))
    })?;
    if read.success != "true" {
        let said = read
            .error
            .as_ref()
            .map_or_else(|| "no error given".to_owned(), error_words);
        return Err(Unread::Refused(format!(
            "{what}: Mobile Commons answered success=\"{}\": {said}",
            crate::model::text::bounded(&read.success, 20)
        )));
    }
    Ok(read)
}

/// Whether `text` is an XML document whose root is `<response`: the XML reader takes any
/// root, and any text, for a struct whose fields all have defaults.
fn is_response(text: &str) -> bool {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    if let Some(prolog) = rest.strip_prefix("<?xml") {
        rest = prolog
            .split_once("?>")
            .map_or("", |(_, after)| after)
            .trim_start();
    }
    rest.strip_prefix("<response")
        .and_then(|after| after.chars().next())
        .is_some_and(|c| c == '>' || c == '/' || c.is_whitespace())
}

/// [`parsed`], as a read takes it: an answer not in the XML expected is tried again, a
/// refusal stops the read with Mobile Commons' words.
fn response(text: &str, what: &str) -> Result<Response, ReadError> {
    parsed(text, what).map_err(|unread| match unread {
        Unread::NotXml(error) => ReadError::Stop(super::Stop::retry(error)),
        Unread::Refused(error) => ReadError::Input(error),
    })
}

/// `<error id=... message=...>` in an answer's XML; `None` for any other text (a 401's).
fn error_words_in(text: &str) -> Option<String> {
    let read: Response = quick_xml::de::from_str(text).ok()?;
    read.error.as_ref().map(error_words)
}

/// An error element, as Mobile Commons words it: `5 Invalid phone number`.
fn error_words(error: &ErrorElement) -> String {
    crate::model::text::bounded(&format!("{} {}", error.id, error.message), 200)
}

/// A time as Mobile Commons writes it (`2026-11-28 07:05:28 UTC`), or RFC 3339.
fn time(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    let naive = text.strip_suffix(" UTC").unwrap_or(text);
    NaiveDateTime::parse_from_str(naive, "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|at| at.and_utc())
}

impl Source for Profiles {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        self.with_key(request, key)
    }

    /// Mobile Commons' errors are XML, not JSON.
    fn error_words(&self, _body: &serde_json::Value) -> Option<String> {
        None
    }

    /// `<error id=... message=...>` in an answer's XML; a 401's text as it is.
    fn error_words_in(&self, text: &str) -> Option<String> {
        error_words_in(text)
    }

    /// A page of one profile answers a login (or the token) of the company.
    fn check<'a>(&'a self, api: SourceApi<'a>) -> Pending<'a, Result<Vec<String>, ReadError>> {
        Box::pin(async move {
            let url = api.url(&self.path(ONE_PROFILE))?;
            let text = api.get_text_at(url, "the profiles").await?;
            let read = response(&text, "the profiles")?;
            let some = read.profiles.is_some_and(|p| !p.profiles.is_empty());
            let with = if self.bearer { "token" } else { "login" };
            Ok(vec![if some {
                format!("the {with} reads the profiles (a page of one profile answered)")
            } else {
                format!("the {with} reads the profiles (none yet)")
            }])
        })
    }

    fn read<'a>(
        &'a self,
        api: SourceApi<'a>,
        window: Window,
        out: Records,
    ) -> Pending<'a, Result<DateTime<Utc>, ReadError>> {
        Box::pin(async move {
            let format = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H:%M:%SZ").to_string();
            // From the watermark on, with no `to`: a profile whose `updated_at` Mobile
            // Commons dated in the future would never be listed between the watermark and
            // now, and its STOP would be lost; listed, it ranks at its reading (the trust
            // rule), and its record is claimed once however often it is listed again.
            let query = format!(
                "from={}&limit={LIMIT}&include_custom_columns=false&include_subscriptions=false&include_clicks=false",
                format(window.from - OVERLAP),
            );
            let page_path = |page: u64| self.path(&format!("{query}&page={page}"));
            let first = api.url(&page_path(1))?;
            let page = std::sync::atomic::AtomicU64::new(1);
            read_listing(&api, ("the profiles", first), &window, &out, |text| {
                let read = response(text, "the profiles")?;
                let profiles = read.profiles.map(|p| p.profiles).unwrap_or_default();
                // Numbered pages, until an empty one: the next page's URL in full (a path
                // would be read from the host's root, as a link an answer gave).
                let next = match profiles.is_empty() {
                    true => None,
                    false => {
                        let number = page.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        Some(api.url(&page_path(number))?.to_string())
                    }
                };
                let items = profiles
                    .iter()
                    .map(|profile| records_of(profile, window.region))
                    .collect();
                Ok((items, next))
            })
            .await
        })
    }
}

/// The record of `profile`: an opt-out when it texted a STOP word, or was opted out and is
/// subscribed to nothing since.
fn records_of(profile: &Profile, region: crate::model::phone::Region) -> Listed {
    let modified = time(&profile.updated_at);
    // The status too: a profile seeded and opted out within one second (Mobile Commons'
    // times are whole seconds) is two records, not one read twice.
    let key = format!(
        "{}:{}:{}:{}",
        crate::model::text::bounded(&profile.id, 40),
        crate::model::text::bounded(&profile.phone_number, 40),
        crate::model::text::bounded(&profile.updated_at, 40),
        crate::model::text::bounded(&profile.status, 40)
    );
    let stands_on = json!({ "profile": profile });
    let said = match opted_out(profile) {
        Err(why) => Said::Nothing(why),
        Ok(at) => opt_out(profile, region, at),
    };
    Listed {
        modified,
        records: vec![ReadRecord {
            key,
            said,
            stands_on,
        }],
    }
}

/// When `profile` opted out, by its status: it texted a STOP word (at `opted_out_at`, else
/// `updated_at`), or was opted out and is subscribed to nothing since (at `opted_out_at`);
/// else why it is no opt-out. The one reading of both sides: what is read as an opt-out is
/// what the destination finds held already.
fn opted_out(profile: &Profile) -> Result<DateTime<Utc>, String> {
    let Some(updated) = time(&profile.updated_at) else {
        return Err("no updated_at Mobile Commons writes".to_owned());
    };
    let status = profile.status.trim();
    match (status, time(&profile.opted_out_at)) {
        (TEXTED_STOP, at) => Ok(at.unwrap_or(updated)),
        (status, Some(at)) if NO_SUBSCRIPTIONS.contains(&status) => Ok(at),
        (status, _) => Err(format!(
            "status {}{}",
            crate::model::text::quoted(status),
            if NO_SUBSCRIPTIONS.contains(&status) {
                " without opted_out_at (never subscribed)"
            } else {
                ""
            }
        )),
    }
}

/// An opt-out of the profile's number at `at`; nothing when it is no number.
fn opt_out(profile: &Profile, region: crate::model::phone::Region, at: DateTime<Utc>) -> Said {
    match number_code_first(&profile.phone_number, region) {
        Ok(phone_number) => Said::Consent {
            phone_number,
            opted_out: true,
            occurred_at: at,
        },
        Err(why) => Said::Nothing(why),
    }
}

/// The destination side: `profile_opt_out`, and what Mobile Commons holds already.
mod write;

#[cfg(test)]
mod tests;
