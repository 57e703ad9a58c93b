//! `[service]`, `[reconcile]` and `[consent]`: the upstream API and what is done with it.

use super::*;

/// `[service]`: the upstream API client.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceSettings {
    /// The service's address; paths add `/v3` or `/v2`.
    pub base_url: String,
    pub api_version: ApiVersion,
    pub client_id: String,
    #[serde(serialize_with = "redact_opt")]
    pub client_secret: Option<SecretString>,
    pub client_secret_file: Option<PathBuf>,
    /// Upper bound on requests per second, shared by every task.
    pub requests_per_second: u32,
    pub timeout_secs: u64,
    /// `base_url` may be plain `http://` to a host that is not loopback although the client
    /// secret is sent to it (never by default: see [`super::validate`]).
    pub allow_insecure_http: bool,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            base_url: "https://api.example.org".into(),
            api_version: ApiVersion::V3,
            client_id: "me@example.org".into(),
            client_secret: None,
            client_secret_file: None,
            requests_per_second: 20,
            timeout_secs: 30,
            allow_insecure_http: false,
        }
    }
}

/// Upstream API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiVersion {
    V3,
    V2,
}

/// `[reconcile]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcileSettings {
    /// Cron expression with seconds; empty disables the schedule.
    pub schedule: Schedule,
    pub on_start: bool,
    /// Organizations to scan; empty means every organization of the account.
    pub organizations: Vec<String>,
    pub message_stale_after_secs: u64,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            schedule: Schedule::from("0 */15 * * * *"),
            on_start: true,
            organizations: Vec::new(),
            message_stale_after_secs: 3600,
        }
    }
}

/// `[consent]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsentSettings {
    /// A consent change applies to every mirrored lead with the same number.
    pub account_sync: bool,
    /// An opt-out recorded in one account is recorded, pushed and suppressed in every other
    /// account this daemon serves (an opt-in never is).
    pub share_across_accounts: bool,
    /// How far past its receipt a time another system gives may lie and still rank as
    /// given (clocks drift; events reordered within it keep their order); a later one
    /// ranks at its receipt, the original kept in the evidence.
    pub future_tolerance_secs: u64,
    /// The region a number without its country code is read in, from every system
    /// (ISO 3166-1 alpha-2).
    pub default_region: String,
    /// From this day (`YYYY-MM-DD`, midnight in `[compliance] timezone`) an opt-out given
    /// in a member of a `[[caller]]` binds every member (the FCC's revoke-all rule); `""`:
    /// never.
    pub revoke_all_from: String,
}

impl Default for ConsentSettings {
    fn default() -> Self {
        Self {
            account_sync: false,
            share_across_accounts: false,
            future_tolerance_secs: crate::model::trust::DEFAULT_FUTURE_TOLERANCE_SECS,
            default_region: "US".to_owned(),
            revoke_all_from: super::REVOKE_ALL_FROM.to_owned(),
        }
    }
}

impl ConsentSettings {
    /// The trust boundary's rules as configured ([`crate::model::trust::Trust`]); the
    /// default region when `default_region` is not one (refused by validation before).
    pub fn trust(&self) -> crate::model::trust::Trust {
        crate::model::trust::Trust {
            future_tolerance: chrono::TimeDelta::seconds(
                i64::try_from(self.future_tolerance_secs).unwrap_or(i64::MAX / 1000),
            ),
            region: self.default_region.parse().unwrap_or_default(),
        }
    }
}
