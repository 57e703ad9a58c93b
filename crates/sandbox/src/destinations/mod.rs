//! The campaign's systems of record, faked from their public documents: NGP VAN's API v4
//! (`/van/v4`: HTTP Basic with the database mode suffix, result codes and contact types per
//! committee, canvass responses, a person's phones) and Action Network's API v2
//! (`/actionnetwork/api/v2`: `OSDI-API-Token`, the person signup helper), and Google BigQuery's
//! REST API v2 (`/bigquery/v2`: tables, views and streaming inserts, behind bearer tokens from
//! a fake of Google's OAuth 2.0 token endpoint, `/bigquery/oauth2/token`), and Mobilize's API
//! v1 (`/mobilize/v1`: a bearer key, an organization's people since a time, a source only),
//! and Upland Mobile Commons' REST API (`/mobile_commons/api`: HTTP Basic, XML, the profiles
//! updated between two times, a profile opted out). Each has its own faults and its own truth
//! under `/_control/van`, `/_control/actionnetwork`, `/_control/bigquery`,
//! `/_control/mobilize` and `/_control/mobile_commons`. Their state is apart from the
//! service's world: the links are the VAN ID the seeded leads carry in a custom field, and the
//! leads' numbers, which Mobilize's people and Mobile Commons' profiles are seeded with.

mod action_network;
mod bigquery;
mod control;
mod faults;
mod mobile_commons;
mod mobilize;
mod numbers;
mod van;

use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

pub use action_network::{
    ActionNetworkEmail, ActionNetworkPerson, ActionNetworkPhone, ActionNetworkSignup,
    ActionNetworkTruth,
};
pub use bigquery::{
    BIGQUERY_DATASET, BIGQUERY_PROJECT, BIGQUERY_SCOPE, BIGQUERY_TEST_CLIENT_EMAIL,
    BIGQUERY_TEST_KEY, BIGQUERY_TEST_KEY_PATH, BIGQUERY_TEST_PUBLIC_KEY, BigQueryCounts,
    BigQueryDataset, BigQueryField, BigQueryRow, BigQueryRowRefusal, BigQueryTable, BigQueryTruth,
    BigQueryView, bigquery_key_file,
};
pub use faults::{
    FakeFault, FakeFaults, FakeRequest, FakeRequestCounts, HUGE_BODY_BYTES, REDIRECT_ELSEWHERE,
};
pub use mobile_commons::{
    ACTIVE_SUBSCRIBER as MOBILE_COMMONS_ACTIVE_SUBSCRIBER,
    HARD_BOUNCE as MOBILE_COMMONS_HARD_BOUNCE,
    INVALID_PHONE_NUMBER as MOBILE_COMMONS_INVALID_PHONE_NUMBER,
    INVALID_PHONE_NUMBER_ID as MOBILE_COMMONS_INVALID_PHONE_NUMBER_ID, MOBILE_COMMONS_CAMPAIGN_ID,
    MOBILE_COMMONS_DEFAULT_LIMIT, MOBILE_COMMONS_MAX_LIMIT, MobileCommonsOptOutCall,
    MobileCommonsProfile, MobileCommonsSubscription, MobileCommonsTruth,
    NO_SUBSCRIPTIONS as MOBILE_COMMONS_NO_SUBSCRIPTIONS,
    NO_SUBSCRIPTIONS_OLD as MOBILE_COMMONS_NO_SUBSCRIPTIONS_OLD,
    OPT_OUT_FROM_API as MOBILE_COMMONS_OPT_OUT_FROM_API, STATUSES as MOBILE_COMMONS_STATUSES,
    SUBSCRIPTION_ACTIVE as MOBILE_COMMONS_SUBSCRIPTION_ACTIVE,
    SUBSCRIPTION_OPTED_OUT as MOBILE_COMMONS_SUBSCRIPTION_OPTED_OUT,
    TEXTED_STOP as MOBILE_COMMONS_TEXTED_STOP, UNDELIVERABLE as MOBILE_COMMONS_UNDELIVERABLE,
};
pub use mobilize::{
    MOBILIZE_DEFAULT_PER_PAGE, MOBILIZE_MAX_PER_PAGE, MOBILIZE_ORGANIZATION_ID, MobilizeAddress,
    MobilizeEmail, MobilizePerson, MobilizePhone, MobilizeTruth, OPT_IN as MOBILIZE_OPT_IN,
    OPT_OUT as MOBILIZE_OPT_OUT,
};
pub use van::{
    HUGE_FILE_BYTES as VAN_HUGE_FILE_BYTES, VanCanvassPhone, VanCanvassResponse, VanChange,
    VanChangeKind, VanChangedBy, VanCommitteeTruth, VanContactType, VanDownload,
    VanDownloadCredential, VanExportJobTruth, VanExportSettings, VanMark, VanPerson, VanPhone,
    VanResultCode, VanTarget, VanTruth,
};
pub(crate) use van::{VAN_ID_FIELD, van_id_for_lead};

use crate::config::SandboxConfig;
use crate::wire::Lead;
use action_network::ActionNetwork;
use bigquery::BigQuery;
use faults::Switchboard;
use mobile_commons::MobileCommons;
use mobilize::Mobilize;
use van::Van;

/// Which fake: for the Rust handle, the control endpoints, and how it words an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fake {
    /// `{"errors":[{"code","text"}]}`.
    Van,
    /// `{"error":"..."}`.
    ActionNetwork,
    /// Google's `{"error":{"code","message","errors":[{"message","domain","reason"}],"status"}}`.
    BigQuery,
    /// `{"data":null,"error":{"detail":"..."}}`.
    Mobilize,
    /// `<response success="false"><error id="0" message="..."/></response>`.
    MobileCommons,
}

impl Fake {
    /// The body of an injected error status.
    fn injected(self, status: StatusCode) -> Response {
        let reason = status.canonical_reason().unwrap_or("Error");
        match self {
            Self::Van => {
                let code = reason.to_ascii_uppercase().replace([' ', '-'], "_");
                van::VanError::new(status, code, format!("{reason} (injected)")).into_response()
            }
            Self::ActionNetwork => {
                action_network::error(status, format!("{reason} (injected)")).into_response()
            }
            Self::BigQuery => bigquery::injected(status),
            Self::Mobilize => mobilize::detail(status, format!("{reason} (injected)")),
            Self::MobileCommons => {
                mobile_commons::error(status, 0, &format!("{reason} (injected)"))
            }
        }
    }

    /// The body of an injected quota (`quota`) or rate limit: BigQuery's 403 `quotaExceeded`
    /// or `rateLimitExceeded`; the others' 403 or 429.
    fn limited(self, quota: bool) -> Response {
        match self {
            Self::BigQuery => bigquery::limited(quota),
            _ if quota => self.injected(StatusCode::FORBIDDEN),
            _ => self.injected(StatusCode::TOO_MANY_REQUESTS),
        }
    }
}

/// The fakes: their state and their switchboards.
pub(crate) struct Fakes {
    van: Mutex<Van>,
    action_network: Mutex<ActionNetwork>,
    bigquery: Mutex<BigQuery>,
    mobilize: Mutex<Mobilize>,
    mobile_commons: Mutex<MobileCommons>,
    van_board: Switchboard,
    action_network_board: Switchboard,
    bigquery_board: Switchboard,
    mobilize_board: Switchboard,
    mobile_commons_board: Switchboard,
    /// Ends the files being streamed when the sandbox stops.
    cancel: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fakes {
    /// `people`: the seeded leads that have a VAN ID, as (VAN ID, lead id, phone number);
    /// `leads`: every seeded lead, whose numbers Mobilize's people have.
    pub(crate) fn new(
        config: &SandboxConfig,
        people: &[(u64, String, String)],
        leads: &[Lead],
        cancel: CancellationToken,
    ) -> Self {
        let seeded_at = chrono::Utc::now().timestamp();
        Self {
            van: Mutex::new(Van::new(&config.van_committees, people)),
            action_network: Mutex::new(ActionNetwork::new(config.action_network_key.clone())),
            bigquery: Mutex::new(BigQuery::new()),
            mobilize: Mutex::new(Mobilize::new(config.mobilize_key.clone(), leads, seeded_at)),
            mobile_commons: Mutex::new(
                MobileCommons::new(
                    config.mobile_commons_username.clone(),
                    config.mobile_commons_password.clone(),
                    leads,
                    chrono::DateTime::from_timestamp(seeded_at, 0).unwrap_or_else(chrono::Utc::now),
                )
                .with_token(config.mobile_commons_token.clone()),
            ),
            van_board: Switchboard::new(Fake::Van, cancel.clone()),
            action_network_board: Switchboard::new(Fake::ActionNetwork, cancel.clone()),
            bigquery_board: Switchboard::new(Fake::BigQuery, cancel.clone()),
            mobilize_board: Switchboard::new(Fake::Mobilize, cancel.clone()),
            mobile_commons_board: Switchboard::new(Fake::MobileCommons, cancel.clone()),
            cancel,
        }
    }

    fn van(&self) -> MutexGuard<'_, Van> {
        lock(&self.van)
    }

    fn action_network(&self) -> MutexGuard<'_, ActionNetwork> {
        lock(&self.action_network)
    }

    fn bigquery(&self) -> MutexGuard<'_, BigQuery> {
        lock(&self.bigquery)
    }

    fn mobilize(&self) -> MutexGuard<'_, Mobilize> {
        lock(&self.mobilize)
    }

    fn mobile_commons(&self) -> MutexGuard<'_, MobileCommons> {
        lock(&self.mobile_commons)
    }

    pub(crate) fn board(&self, fake: Fake) -> &Switchboard {
        match fake {
            Fake::Van => &self.van_board,
            Fake::ActionNetwork => &self.action_network_board,
            Fake::BigQuery => &self.bigquery_board,
            Fake::Mobilize => &self.mobilize_board,
            Fake::MobileCommons => &self.mobile_commons_board,
        }
    }

    pub(crate) fn van_truth(&self) -> VanTruth {
        self.van().truth(self.van_board.counts())
    }

    pub(crate) fn action_network_truth(&self) -> ActionNetworkTruth {
        self.action_network()
            .truth(self.action_network_board.counts())
    }

    pub(crate) fn bigquery_truth(&self) -> BigQueryTruth {
        self.bigquery().truth(self.bigquery_board.counts())
    }

    /// A BigQuery dataset exists (any project); `false` if it did.
    pub(crate) fn bigquery_add_dataset(&self, project: &str, dataset: &str) -> bool {
        self.bigquery().add_dataset(project, dataset)
    }

    pub(crate) fn bigquery_set_token_lifetime(&self, secs: u64) {
        self.bigquery().set_token_lifetime(secs);
    }

    pub(crate) fn bigquery_set_dedup_window(&self, window: std::time::Duration) {
        self.bigquery().set_dedup_window(window);
    }

    /// BigQuery refuses rows whose `field` equals `value`, with `reason`.
    pub(crate) fn bigquery_refuse_rows(&self, field: &str, value: &str, reason: &str) {
        let refusal = BigQueryRowRefusal::new(field, value, Some(reason.to_owned()), None);
        self.bigquery().refuse_rows(refusal);
    }

    pub(crate) fn bigquery_clear_refusals(&self) {
        self.bigquery().clear_refusals();
    }

    pub(crate) fn bigquery_drop_table(&self, table: &str) -> bool {
        self.bigquery().drop_table(table)
    }

    /// The BigQuery token endpoint accepts JWTs of `client_email` signed with `pem`'s key.
    pub(crate) fn bigquery_add_key(&self, client_email: &str, pem: &str) -> Result<(), String> {
        self.bigquery().add_key(client_email, pem)
    }

    /// The committee of `api_key` answers every request with `status` (401 or 403) until
    /// restored (`None`). `false` if no committee has the key.
    pub(crate) fn van_revoke(&self, api_key: &str, status: Option<u16>) -> bool {
        self.van().revoke(api_key, status)
    }

    /// The committee of `api_key` has the contact type "SMS Text", or lacks it. `false` if
    /// no committee has the key.
    pub(crate) fn van_sms_text(&self, api_key: &str, present: bool) -> bool {
        self.van().set_sms_text(api_key, present)
    }

    /// A new VAN person with this number (E.164); returns the VAN ID.
    pub(crate) fn van_add_person(&self, phone: &str) -> u64 {
        self.van().add_person(None, phone)
    }

    /// A user of the committee of `api_key` marks a person; the change logged, or why not.
    pub(crate) fn van_mark(
        &self,
        api_key: &str,
        target: &VanTarget,
        mark: VanMark,
        user: &str,
    ) -> Result<VanChange, String> {
        self.van().mark(api_key, target, mark, user)
    }

    /// `count` changes seeded in the committee of `api_key`; the first VAN ID.
    pub(crate) fn van_seed(&self, api_key: &str, count: u64, do_not_text: bool) -> Option<u64> {
        self.van().seed(api_key, count, do_not_text)
    }

    /// A supporter unsubscribes their mobile number in Action Network.
    pub(crate) fn action_network_unsubscribe(
        &self,
        phone: &str,
    ) -> Option<(ActionNetworkPerson, bool)> {
        self.action_network().unsubscribe(phone)
    }

    pub(crate) fn action_network_seed(&self, count: u64) {
        self.action_network().seed(count);
    }

    pub(crate) fn action_network_endless_next(&self, on: bool) {
        self.action_network().set_endless_next(on);
    }

    pub(crate) fn action_network_next_href(&self, href: Option<String>) {
        self.action_network().set_next_href(href);
    }

    pub(crate) fn action_network_add_person(
        &self,
        number: &str,
        status: &str,
        modified_date: &str,
    ) -> ActionNetworkPerson {
        self.action_network()
            .add_person(number, status, modified_date)
    }

    pub(crate) fn mobilize_truth(&self) -> MobilizeTruth {
        self.mobilize().truth(self.mobilize_board.counts())
    }

    pub(crate) fn mobilize_listings_served(&self) -> u64 {
        self.mobilize().listings_served()
    }

    /// A supporter opts out of texts on Mobilize, now.
    pub(crate) fn mobilize_opt_out(&self, phone: &str) -> Option<(MobilizePerson, bool)> {
        self.mobilize()
            .opt_out(phone, chrono::Utc::now().timestamp())
    }

    /// `count` more people on Mobilize, each opted out, modified now.
    pub(crate) fn mobilize_seed(&self, count: u64) {
        self.mobilize().seed(count, chrono::Utc::now().timestamp());
    }

    pub(crate) fn mobilize_next_href(&self, href: Option<String>) {
        self.mobilize().set_next_href(href);
    }

    pub(crate) fn mobilize_add_person(
        &self,
        number: &str,
        status: &str,
        modified_date: i64,
    ) -> MobilizePerson {
        self.mobilize().add_person(number, status, modified_date)
    }

    pub(crate) fn mobile_commons_truth(&self) -> MobileCommonsTruth {
        self.mobile_commons()
            .truth(self.mobile_commons_board.counts())
    }

    pub(crate) fn mobile_commons_listings_served(&self) -> u64 {
        self.mobile_commons().listings_served()
    }

    /// A person texts STOP to the Mobile Commons campaign, now.
    pub(crate) fn mobile_commons_stop(&self, phone: &str) -> Option<(MobileCommonsProfile, bool)> {
        self.mobile_commons().stop(phone, chrono::Utc::now())
    }

    /// `count` more profiles on Mobile Commons, each opted out by STOP, updated now.
    pub(crate) fn mobile_commons_seed(&self, count: u64) {
        self.mobile_commons().seed(count, chrono::Utc::now());
    }

    pub(crate) fn mobile_commons_endless(&self, on: bool) {
        self.mobile_commons().set_endless(on);
    }

    pub(crate) fn mobile_commons_add_profile(
        &self,
        number: &str,
        status: &str,
        updated_at: chrono::DateTime<chrono::Utc>,
    ) -> MobileCommonsProfile {
        self.mobile_commons()
            .add_profile(number, status, updated_at)
    }

    pub(crate) fn van_set_export(&self, api_key: &str, settings: VanExportSettings) -> bool {
        self.van().set_export(api_key, settings)
    }
}

pub(crate) type FakesState = Arc<Fakes>;

async fn van_faults(State(fakes): State<FakesState>, request: Request, next: Next) -> Response {
    fakes.van_board.run(request, next).await
}

async fn action_network_faults(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    fakes.action_network_board.run(request, next).await
}

async fn bigquery_faults(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    fakes.bigquery_board.run(request, next).await
}

async fn mobilize_faults(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    fakes.mobilize_board.run(request, next).await
}

async fn mobile_commons_faults(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    fakes.mobile_commons_board.run(request, next).await
}

/// `/van/v4/...`, `/actionnetwork/api/v2/...`, `/bigquery/v2/...` (and its token endpoint,
/// `/bigquery/oauth2/token`), `/mobilize/v1/...`, `/mobile_commons/api/...`, and their
/// controls under `/_control`.
pub(crate) fn router(fakes: FakesState) -> Router {
    let van = van::routes()
        .route_layer(middleware::from_fn_with_state(fakes.clone(), van::auth))
        .route_layer(middleware::from_fn_with_state(fakes.clone(), van_faults))
        .fallback(van::no_such_endpoint);
    let guarded = |routes: Router<FakesState>| {
        routes
            .route_layer(middleware::from_fn_with_state(
                fakes.clone(),
                action_network::auth,
            ))
            .route_layer(middleware::from_fn_with_state(
                fakes.clone(),
                action_network_faults,
            ))
    };
    let action_network =
        guarded(action_network::routes()).fallback(action_network::no_such_endpoint);
    // The entry point is documented with its trailing slash, which a nested `/` does not take.
    let entry_point = guarded(Router::new().route(
        "/actionnetwork/api/v2/",
        axum::routing::get(action_network::entry_point),
    ));
    let bigquery = bigquery::routes()
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            bigquery::auth,
        ))
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            bigquery_faults,
        ))
        .fallback(bigquery::no_such_endpoint);
    let mobilize = mobilize::routes()
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            mobilize::auth,
        ))
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            mobilize_faults,
        ))
        .fallback(mobilize::no_such_endpoint);
    let mobile_commons = mobile_commons::routes()
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            mobile_commons::auth,
        ))
        .route_layer(middleware::from_fn_with_state(
            fakes.clone(),
            mobile_commons_faults,
        ))
        .fallback(mobile_commons::no_such_endpoint);
    Router::new()
        .nest("/van/v4", van)
        .nest("/bigquery/v2", bigquery)
        .merge(bigquery::token_routes())
        .route("/van-files/{file}", axum::routing::get(van::download))
        .nest("/actionnetwork/api/v2", action_network)
        .merge(entry_point)
        .nest("/mobilize/v1", mobilize)
        .nest("/mobile_commons/api", mobile_commons)
        .merge(control::routes())
        .merge(van::control_routes())
        .merge(action_network::control_routes())
        .merge(bigquery::control_routes())
        .merge(mobilize::control_routes())
        .merge(mobile_commons::control_routes())
        .with_state(fakes)
}
