//! The sandbox: an in-memory implementation of the service's v3 API (and the v2.1 reads and
//! consent update the daemon uses) that
//! delivers signed webhooks with injected faults. The test double of every integration
//! test, the engine of `demo`, and a tool users can point their own code at.
//!
//! In process: [`Sandbox::spawn`] returns a [`RunningSandbox`]. Over HTTP: `/v3/...`,
//! `/v2/...` and the unauthenticated test controls under `/_control/...`; beside them, fakes
//! of the campaign's systems of record ([`destinations`]): NGP VAN under `/van/v4`, Action
//! Network under `/actionnetwork/api/v2`, Google BigQuery under `/bigquery/v2` (with its
//! OAuth 2.0 token endpoint, `/bigquery/oauth2/token`, and a test service-account key,
//! [`BIGQUERY_TEST_KEY`]), and Mobilize under `/mobilize/v1` (a source: its people's SMS
//! opt-in status, read with [`DEFAULT_MOBILIZE_KEY`]), and Upland Mobile Commons under
//! `/mobile_commons/api` (XML over HTTP Basic with [`DEFAULT_MOBILE_COMMONS_USERNAME`] and
//! [`DEFAULT_MOBILE_COMMONS_PASSWORD`], or a bearer [`DEFAULT_MOBILE_COMMONS_TOKEN`]: its
//! profiles read, a profile opted out). Beside them
//! too, the inbound-message webhooks of the carriers a campaign's texting number may be with,
//! each posted as the carrier posts it: [`twilio`] (form-encoded, HMAC-SHA1), [`telnyx`] (JSON, Ed25519) and
//! [`bandwidth`] (a JSON array, HTTP Basic).
//!
//! It does not depend on the daemon: its wire types ([`wire`]), its validation and its
//! signing ([`Signing`]) are its own, written from the service's documents, so the daemon's
//! client and the sandbox check each other.
#![forbid(unsafe_code)]
// What other crates do not use stays `pub(crate)`.
#![warn(unreachable_pub)]

mod api;
pub mod bandwidth;
pub mod cli;
mod config;
mod control;
mod deliver;
pub mod destinations;
mod running;
mod shared;
mod signing;
pub mod telnyx;
pub mod twilio;
mod validate;
pub mod wire;
mod world;

pub use config::{
    ApiFaults, DEFAULT_ACTION_NETWORK_KEY, DEFAULT_BANDWIDTH_PASSWORD, DEFAULT_BANDWIDTH_USERNAME,
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_TOKEN, DEFAULT_MOBILE_COMMONS_USERNAME,
    DEFAULT_MOBILIZE_KEY, DEFAULT_TELNYX_PUBLIC_KEY, DEFAULT_TELNYX_SEED,
    DEFAULT_TWILIO_AUTH_TOKEN, DEFAULT_VAN_KEY, DEFAULT_VAN_KEY_2, DeliverTo, DeliveryFaults,
    SandboxConfig, VanCommittee, default_van_committees,
};
pub use control::Truth;
pub use deliver::{DELIVERY_RECORDS_KEPT, DeliveryCounts, DeliveryRecord, Outcome};
pub use destinations::{
    BIGQUERY_TEST_CLIENT_EMAIL, BIGQUERY_TEST_KEY, BIGQUERY_TEST_KEY_PATH, BigQueryTruth,
    MOBILE_COMMONS_CAMPAIGN_ID, MOBILE_COMMONS_STATUSES, MOBILIZE_ORGANIZATION_ID,
    MobileCommonsProfile, MobileCommonsTruth, MobilizeTruth, bigquery_key_file,
};
pub use running::{RunningSandbox, Sandbox};
pub use shared::{ApiRequest, StatsSnapshot};
pub use signing::{Algorithm, Encoding, HmacSigning, Signing};
pub use world::{Refusal, SandboxMessage};
