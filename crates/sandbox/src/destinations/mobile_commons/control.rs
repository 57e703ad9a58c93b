//! `/_control/mobile_commons/...`: the fake's truth, and what a test does to it (its faults
//! and latency are under `/_control/mobile_commons/faults` and `/latency`, as every fake's).
//!
//! - `GET /_control/mobile_commons`: the truth (profiles, `profile_opt_out` calls received,
//!   listings served, request counts).
//! - `POST /_control/mobile_commons/stop` `{"phoneNumber"}`: the person texts STOP (status
//!   `Texted a STOP word`, the subscription `Opted-Out`, `opted_out_at` and `updated_at` now,
//!   `opted_out_source` `Texted a STOP word`; a profile is made when nobody has the number):
//!   200 `{"profile","created"}`; 400 if it is no number.
//! - `POST /_control/mobile_commons/seed` `{"count"}`: that many more profiles, each opted
//!   out by STOP, one number each (`1312600NNNN` on), updated now: 201 `{"count"}`.
//! - `POST /_control/mobile_commons/profile` `{"number","updatedAt","status"}`: hostile, a
//!   profile with one number exactly as written (`4155550100`, without its country code),
//!   any `updated_at` (RFC 3339 or `2100-01-01 00:00:00 UTC`) and any status (default
//!   `Active Subscriber`; control characters and all): 201 `{"profile"}`.
//! - `PUT /_control/mobile_commons/endless` `{"on"}`: hostile, a page past the last repeats
//!   the last page (204).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use super::listing::parse_time;
use super::{
    ACTIVE_SUBSCRIBER, MobileCommons, MobileCommonsProfile, MobileCommonsTruth,
    SUBSCRIPTION_OPTED_OUT, TEXTED_STOP, digits,
};
use crate::destinations::FakesState;
use crate::destinations::control::{body, opted_out, refuse, seeded, switched};

/// The controls, merged beside the API.
pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/mobile_commons", get(truth))
        .route("/_control/mobile_commons/stop", post(stop))
        .route("/_control/mobile_commons/seed", post(seed))
        .route("/_control/mobile_commons/profile", post(add_profile))
        .route("/_control/mobile_commons/endless", put(endless))
}

/// `GET /_control/mobile_commons`.
async fn truth(State(fakes): State<FakesState>) -> Json<MobileCommonsTruth> {
    Json(fakes.mobile_commons_truth())
}

impl MobileCommons {
    /// The person with this number (however it is written) texts STOP, at `at`; a profile
    /// is made (`1` and ten digits when it has ten) when nobody has it. Returns the profile
    /// and whether it was made; `None` if `raw` is not a number.
    pub(crate) fn stop(
        &mut self,
        raw: &str,
        at: DateTime<Utc>,
    ) -> Option<(MobileCommonsProfile, bool)> {
        let wanted = digits(raw)?;
        let found = self.find(&wanted);
        let profile = match found {
            Some(index) => &mut self.profiles[index],
            None => self.make(wanted, TEXTED_STOP, at),
        };
        profile.status = TEXTED_STOP.into();
        profile.updated_at = at;
        profile.opted_out_at = Some(at);
        profile.opted_out_source = Some(TEXTED_STOP.into());
        for s in &mut profile.subscriptions {
            s.status = SUBSCRIPTION_OPTED_OUT.into();
            s.opted_out_at = Some(at);
            s.opt_out_source = Some(TEXTED_STOP.into());
        }
        Some((profile.clone(), found.is_none()))
    }

    /// Hostile: pages past the last repeat the last one.
    pub(crate) fn set_endless(&mut self, on: bool) {
        self.endless = on;
    }

    /// A profile with one number written as `number`, `status`, updated at `updated_at`,
    /// all as given: what another system may hold. Made now.
    pub(crate) fn add_profile(
        &mut self,
        number: &str,
        status: &str,
        updated_at: DateTime<Utc>,
    ) -> MobileCommonsProfile {
        let profile = self.make(number.to_owned(), status, Utc::now());
        profile.updated_at = updated_at;
        profile.clone()
    }
}

/// `POST /_control/mobile_commons/stop`.
async fn stop(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    opted_out(&bytes, "profile", |phone| fakes.mobile_commons_stop(phone))
}

/// `POST /_control/mobile_commons/seed`.
async fn seed(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    seeded(&bytes, |count| fakes.mobile_commons_seed(count))
}

/// The body of a hostile profile.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddProfile {
    number: String,
    updated_at: String,
    #[serde(default = "active")]
    status: String,
}

/// The status of a hostile profile when the body gives none.
fn active() -> String {
    ACTIVE_SUBSCRIBER.into()
}

/// `POST /_control/mobile_commons/profile`.
async fn add_profile(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<AddProfile>(&bytes) {
        Ok(b) => match parse_time(&b.updated_at) {
            Some(updated_at) => {
                let profile = fakes.mobile_commons_add_profile(&b.number, &b.status, updated_at);
                (StatusCode::CREATED, Json(json!({ "profile": profile }))).into_response()
            }
            None => refuse(StatusCode::BAD_REQUEST, "updatedAt: not a time"),
        },
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// `PUT /_control/mobile_commons/endless`.
async fn endless(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    switched(&bytes, |on| fakes.mobile_commons_endless(on))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_opts_out_every_subscription_and_keeps_the_creation() {
        let at = Utc::now();
        let mut fake = MobileCommons::new("u".into(), "p".into(), &[], at);
        let made = fake.add_profile("4155550100", ACTIVE_SUBSCRIBER, at);
        let later = at + chrono::Duration::seconds(60);
        let (after, created) = fake.stop("+1 415 555 0100", later).expect("a number");
        assert!(!created);
        assert_eq!(after.id, made.id);
        assert_eq!(after.status, TEXTED_STOP);
        assert_eq!((after.updated_at, after.opted_out_at), (later, Some(later)));
        assert_eq!(after.created_at, made.created_at);
        assert!(
            after
                .subscriptions
                .iter()
                .all(|s| s.status == SUBSCRIPTION_OPTED_OUT)
        );
        assert_eq!(after.phone_number, "4155550100", "kept as written");
        assert!(fake.stop("call me", later).is_none());
    }
}
