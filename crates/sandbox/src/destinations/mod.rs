//! The campaign's systems of record, faked from their public documents: NGP VAN's API v4
//! (`/van/v4`: HTTP Basic with the database mode suffix, result codes and contact types per
//! committee, canvass responses, a person's phones) and Action Network's API v2
//! (`/actionnetwork/api/v2`: `OSDI-API-Token`, the person signup helper). Each has its own
//! faults and its own truth under `/_control/van` and `/_control/actionnetwork`. Their state
//! is apart from the service's world: the one link is the VAN ID the seeded leads carry in a
//! custom field.

mod action_network;
mod control;
mod faults;
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
pub use faults::{
    FakeFault, FakeFaults, FakeRequest, FakeRequestCounts, HUGE_BODY_BYTES, REDIRECT_ELSEWHERE,
};
pub use van::{
    HUGE_FILE_BYTES as VAN_HUGE_FILE_BYTES, VanCanvassPhone, VanCanvassResponse, VanChange,
    VanChangeKind, VanChangedBy, VanCommitteeTruth, VanContactType, VanDownload,
    VanDownloadCredential, VanExportJobTruth, VanExportSettings, VanMark, VanPerson, VanPhone,
    VanResultCode, VanTarget, VanTruth,
};
pub(crate) use van::{VAN_ID_FIELD, van_id_for_lead};

use crate::config::SandboxConfig;
use action_network::ActionNetwork;
use faults::Switchboard;
use van::Van;

/// Which fake: for the Rust handle, the control endpoints, and how it words an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fake {
    /// `{"errors":[{"code","text"}]}`.
    Van,
    /// `{"error":"..."}`.
    ActionNetwork,
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
        }
    }
}

/// Both fakes: their state and their switchboards.
pub(crate) struct Fakes {
    van: Mutex<Van>,
    action_network: Mutex<ActionNetwork>,
    van_board: Switchboard,
    action_network_board: Switchboard,
    /// Ends the files being streamed when the sandbox stops.
    cancel: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fakes {
    /// `people`: the seeded leads that have a VAN ID, as (VAN ID, lead id, phone number).
    pub(crate) fn new(
        config: &SandboxConfig,
        people: &[(u64, String, String)],
        cancel: CancellationToken,
    ) -> Self {
        Self {
            van: Mutex::new(Van::new(&config.van_committees, people)),
            action_network: Mutex::new(ActionNetwork::new(config.action_network_key.clone())),
            van_board: Switchboard::new(Fake::Van, cancel.clone()),
            action_network_board: Switchboard::new(Fake::ActionNetwork, cancel.clone()),
            cancel,
        }
    }

    fn van(&self) -> MutexGuard<'_, Van> {
        lock(&self.van)
    }

    fn action_network(&self) -> MutexGuard<'_, ActionNetwork> {
        lock(&self.action_network)
    }

    pub(crate) fn board(&self, fake: Fake) -> &Switchboard {
        match fake {
            Fake::Van => &self.van_board,
            Fake::ActionNetwork => &self.action_network_board,
        }
    }

    pub(crate) fn van_truth(&self) -> VanTruth {
        self.van().truth(self.van_board.counts())
    }

    pub(crate) fn action_network_truth(&self) -> ActionNetworkTruth {
        self.action_network()
            .truth(self.action_network_board.counts())
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

/// `/van/v4/...`, `/actionnetwork/api/v2/...` and their controls under `/_control`.
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
    Router::new()
        .nest("/van/v4", van)
        .route("/van-files/{file}", axum::routing::get(van::download))
        .nest("/actionnetwork/api/v2", action_network)
        .merge(entry_point)
        .merge(control::routes())
        .merge(van::control_routes())
        .merge(action_network::control_routes())
        .with_state(fakes)
}
