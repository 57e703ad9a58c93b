//! `GET /profiles` (List All Profiles) and `POST /profile_opt_out` (the module's document
//! says what is Mobile Commons' and what is the fake's).
//!
//! The listing:
//!
//! - `from` and `to` keep the profiles whose `updated_at` is at or after `from` and at or
//!   before `to` ("updated after or on", "before or on", as documented). Documented as
//!   ISO-8601; taken as RFC 3339 (`2026-11-28T07:05:28Z`, any offset), a date and time
//!   without an offset (`2026-11-28T07:05:28` or `2026-11-28 07:05:28`, UTC), the profiles'
//!   own `2026-11-28 07:05:28 UTC`, or a date alone (its midnight, UTC). Anything else is
//!   `<error id="0" message="Invalid date: from"/>` (the fake's: no id is documented).
//! - `phone_number`: a comma-separated list of numbers keeps those profiles only.
//! - `limit`: default 100, as the earlier reference says; at most 1000 ("Maximum of 1000"):
//!   more is served as 1000, without an error (what the document's words and Parsons' own
//!   cap suggest; a client that asks for more and stops at a short page stops early). Not a
//!   positive integer: the default. `page`: 1-based, default 1 (not a positive integer: 1).
//! - The profiles come in `id` order (the order they were made), which an update does not
//!   change: a walk by `page` sees each profile in the window once. A page past the last is
//!   `<profiles num="0" page="N">` with no profile: how a client knows the listing ended.
//! - `include_custom_columns`, `include_subscriptions` and `include_clicks` (default true,
//!   as documented): `false` (or `0`) leaves that element out. `include_members` is taken
//!   and ignored (`integrations` is always served, empty).
//! - Hostile, `endless`: a page past the last repeats the last page, so a client that pages
//!   until it gets an empty page never ends (an empty selection stays empty).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use super::{
    ACTIVE_SUBSCRIBER, INVALID_PHONE_NUMBER, INVALID_PHONE_NUMBER_ID, Include, MobileCommons,
    MobileCommonsOptOutCall, MobileCommonsProfile, NO_SUBSCRIPTIONS, OPT_OUT_FROM_API,
    SUBSCRIPTION_ACTIVE, SUBSCRIPTION_OPTED_OUT, digits, error, xml,
};
use crate::destinations::FakesState;

/// The page size when `limit` is absent.
pub const DEFAULT_LIMIT: usize = 100;

/// The most a page holds, whatever `limit` asks.
pub const MAX_LIMIT: usize = 1000;

/// The fake's error id for a date it cannot read.
const INVALID_DATE_ID: u32 = 0;

/// A time as `from` and `to` are taken, or `None`.
pub(crate) fn parse_time(raw: &str) -> Option<DateTime<Utc>> {
    let raw = raw.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(raw) {
        return Some(at.with_timezone(&Utc));
    }
    let naive = raw.strip_suffix(" UTC").unwrap_or(raw);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(naive, format) {
            return Some(at.and_utc());
        }
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
}

/// What a listing asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) from: Option<DateTime<Utc>>,
    pub(crate) to: Option<DateTime<Utc>>,
    /// The numbers' digits, when `phone_number` is given.
    pub(crate) numbers: Option<Vec<String>>,
    pub(crate) limit: usize,
    pub(crate) page: usize,
    pub(crate) include: Include,
}

/// A flag of the listing: true unless `false` or `0`.
fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query
        .get(name)
        .is_none_or(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "false" | "0"))
}

/// A positive integer, or `None`.
fn positive(raw: Option<&String>) -> Option<usize> {
    raw?.trim().parse::<usize>().ok().filter(|n| *n >= 1)
}

/// The parameters of `query`, or the name of a date it cannot read.
pub(crate) fn params(query: &HashMap<String, String>) -> Result<Params, &'static str> {
    let time = |name: &'static str| match query.get(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(None),
        Some(raw) => parse_time(raw).map(Some).ok_or(name),
    };
    let numbers = query
        .get("phone_number")
        .map(|raw| raw.split(',').filter_map(digits).collect::<Vec<String>>());
    Ok(Params {
        from: time("from")?,
        to: time("to")?,
        numbers,
        limit: positive(query.get("limit")).map_or(DEFAULT_LIMIT, |n| n.min(MAX_LIMIT)),
        page: positive(query.get("page")).unwrap_or(1),
        include: Include {
            custom_columns: flag(query, "include_custom_columns"),
            subscriptions: flag(query, "include_subscriptions"),
            clicks: flag(query, "include_clicks"),
        },
    })
}

/// Whether `profile` is in the listing `params` asks for.
fn selected(profile: &MobileCommonsProfile, params: &Params) -> bool {
    params.from.is_none_or(|from| profile.updated_at >= from)
        && params.to.is_none_or(|to| profile.updated_at <= to)
        && params.numbers.as_ref().is_none_or(|numbers| {
            digits(&profile.phone_number).is_some_and(|d| numbers.contains(&d))
        })
}

/// The profiles of the page `params` asks for, in order; with `endless`, a page past the
/// last is the last.
pub(crate) fn page<'a>(
    profiles: &'a [MobileCommonsProfile],
    params: &Params,
    endless: bool,
) -> Vec<&'a MobileCommonsProfile> {
    let matched: Vec<&MobileCommonsProfile> =
        profiles.iter().filter(|p| selected(p, params)).collect();
    let len = matched.len();
    let mut start = (params.page - 1).saturating_mul(params.limit);
    if start >= len && endless && len > 0 {
        start = (len - 1) / params.limit * params.limit;
    }
    let start = start.min(len);
    let end = start.saturating_add(params.limit).min(len);
    matched[start..end].to_vec()
}

/// `GET /profiles`.
pub(super) async fn list(
    State(fakes): State<FakesState>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let params = match params(&query) {
        Ok(params) => params,
        Err(name) => {
            return error(
                StatusCode::OK,
                INVALID_DATE_ID,
                &format!("Invalid date: {name}"),
            );
        }
    };
    let mut fake = fakes.mobile_commons();
    let mut body = String::new();
    {
        let profiles = page(&fake.profiles, &params, fake.endless);
        body.push_str("<response success=\"true\">\n");
        body.push_str(&format!(
            "  <profiles num=\"{}\" page=\"{}\">\n",
            profiles.len(),
            params.page
        ));
        for profile in profiles {
            profile.write_xml(&mut body, 4, params.include);
        }
        body.push_str("  </profiles>\n</response>");
    }
    fake.listings_served += 1;
    xml(StatusCode::OK, &body)
}

impl MobileCommons {
    /// `profile_opt_out`: the profile with `phone_number` opts out of the campaign
    /// `campaign_id`, or the subscription `subscription_id`, or, with neither, every
    /// subscription, at `at`. Each subscription opted out becomes `Opted-Out` with
    /// `opted_out_at` `at` and `opt_out_source` `Opt-out from API`; the profile, if one was,
    /// gets the same `opted_out_at` and `opted_out_source`, and an `Active Subscriber` left
    /// with no active subscription becomes `Profiles with no Subscriptions` (another status,
    /// `Texted a STOP word` or `Undeliverable`, stays). `updated_at` is `at` in any case; an
    /// earlier opt-out's `opted_out_at` is kept. The call is recorded, refused or not.
    /// The profile as it now is, or the error id.
    pub(crate) fn opt_out(
        &mut self,
        phone_number: &str,
        campaign_id: Option<&str>,
        subscription_id: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<MobileCommonsProfile, u32> {
        let found = self.find(phone_number);
        self.opt_out_calls.push(MobileCommonsOptOutCall {
            phone_number: phone_number.to_owned(),
            campaign_id: campaign_id.map(str::to_owned),
            subscription_id: subscription_id.map(str::to_owned),
            at,
            profile_id: found.map(|i| self.profiles[i].id),
            error_id: found.is_none().then_some(INVALID_PHONE_NUMBER_ID),
        });
        let index = found.ok_or(INVALID_PHONE_NUMBER_ID)?;
        let profile = &mut self.profiles[index];
        let wanted = |id: u64, campaign: u64| match (campaign_id, subscription_id) {
            (None, None) => true,
            (campaign_id, subscription_id) => {
                campaign_id.is_some_and(|c| c.trim() == campaign.to_string())
                    || subscription_id.is_some_and(|s| s.trim() == id.to_string())
            }
        };
        let mut changed = false;
        for s in &mut profile.subscriptions {
            if s.status == SUBSCRIPTION_ACTIVE && wanted(s.id, s.campaign_id) {
                s.status = SUBSCRIPTION_OPTED_OUT.into();
                s.opted_out_at = Some(at);
                s.opt_out_source = Some(OPT_OUT_FROM_API.into());
                changed = true;
            }
        }
        if changed {
            profile.opted_out_at = Some(at);
            profile.opted_out_source = Some(OPT_OUT_FROM_API.into());
        }
        let active = profile
            .subscriptions
            .iter()
            .any(|s| s.status == SUBSCRIPTION_ACTIVE);
        if profile.status == ACTIVE_SUBSCRIBER && !active {
            profile.status = NO_SUBSCRIPTIONS.into();
        }
        profile.updated_at = at;
        Ok(profile.clone())
    }
}

/// The parameters of a POST: the query's, then the form body's over them (Mobile Commons
/// takes either; Parsons sends them in the query).
fn post_params(query: HashMap<String, String>, body: &Bytes) -> HashMap<String, String> {
    let mut params = query;
    if let Ok(pairs) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(body) {
        params.extend(pairs);
    }
    params
}

/// `POST /profile_opt_out`: `phone_number`, and optionally `campaign_id` or
/// `subscription_id`; `<response success="true">` and the `<profile>` as it now is, or
/// `<error id="5" message="Invalid phone number"/>` (200) for a number no profile holds.
pub(super) async fn opt_out(
    State(fakes): State<FakesState>,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let params = post_params(query, &body);
    let field = |name: &str| params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let phone_number = field("phone_number").unwrap_or("");
    let answer = fakes.mobile_commons().opt_out(
        phone_number,
        field("campaign_id"),
        field("subscription_id"),
        Utc::now(),
    );
    match answer {
        Ok(profile) => {
            let mut body = String::from("<response success=\"true\">\n");
            profile.write_xml(&mut body, 2, Include::ALL);
            body.push_str("</response>");
            xml(StatusCode::OK, &body)
        }
        Err(id) => error(StatusCode::OK, id, INVALID_PHONE_NUMBER),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn dates_are_read_in_the_forms_clients_send() {
        let at = parse_time("2026-11-28T07:05:28Z").expect("RFC 3339");
        for same in [
            "2026-11-28T02:05:28-05:00",
            "2026-11-28T07:05:28",
            "2026-11-28 07:05:28",
            "2026-11-28 07:05:28 UTC",
        ] {
            assert_eq!(parse_time(same), Some(at), "{same}");
        }
        assert_eq!(
            parse_time("2026-11-28").map(|d| d.to_rfc3339()),
            Some("2026-11-28T00:00:00+00:00".into())
        );
        for bad in ["yesterday", "1764313528", "28/11/2026", ""] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn limit_and_page_are_bounded_and_defaulted() {
        let defaults = params(&query(&[])).expect("no parameter is needed");
        assert_eq!((defaults.limit, defaults.page), (DEFAULT_LIMIT, 1));
        assert_eq!(defaults.include, Include::ALL);
        let capped = params(&query(&[("limit", "5000"), ("page", "3")])).expect("valid");
        assert_eq!((capped.limit, capped.page), (MAX_LIMIT, 3));
        let odd = params(&query(&[("limit", "0"), ("page", "x")])).expect("valid");
        assert_eq!((odd.limit, odd.page), (DEFAULT_LIMIT, 1));
        let lean = params(&query(&[
            ("include_subscriptions", "false"),
            ("include_custom_columns", "0"),
            ("include_members", "false"),
        ]))
        .expect("valid");
        assert!(!lean.include.subscriptions && !lean.include.custom_columns);
        assert!(lean.include.clicks);
        assert_eq!(params(&query(&[("to", "soon")])), Err("to"));
    }
}
