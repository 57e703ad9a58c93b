//! The daemon's one service client, with its token-request guard kept in the database so a
//! restart loop cannot hammer the token endpoint.

use crate::store::StateStore;
use std::sync::Arc;

use futures::future::BoxFuture;

use chrono::{DateTime, Utc};

use crate::store::Pool;

use crate::client::{ClientConfig, ClientError, ServiceClient, TokenGuardState, TokenGuardStore};
use crate::metrics::Metrics;
use crate::model::AccountId;
use crate::settings::Account;

const GUARD_KEY: &str = "token_guard";

/// Keeps [`TokenGuardState`] in `daemon_state`.
#[derive(Debug, Clone)]
pub struct DbTokenGuardStore {
    pool: Pool,
    /// Its `daemon_state` key: one per account.
    key: String,
}

impl DbTokenGuardStore {
    pub fn new(pool: impl Into<Pool>) -> Self {
        Self::of_account(pool, &AccountId::default_account())
    }

    /// The guard of the account `account`'s token requests.
    pub fn of_account(pool: impl Into<Pool>, account: &AccountId) -> Self {
        let key = if *account == crate::model::DEFAULT_ACCOUNT {
            GUARD_KEY.to_owned()
        } else {
            format!("{GUARD_KEY}:{account}")
        };
        Self {
            pool: pool.into(),
            key,
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    consecutive_failures: u32,
    blocked_until: Option<DateTime<Utc>>,
}

impl TokenGuardStore for DbTokenGuardStore {
    fn load(&self) -> BoxFuture<'_, anyhow::Result<TokenGuardState>> {
        Box::pin(async move {
            let value = self.pool.state(&self.key).await?;
            let stored: Option<Stored> = value.and_then(|v| serde_json::from_str(&v).ok());
            Ok(stored
                .map(|s| TokenGuardState {
                    consecutive_failures: s.consecutive_failures,
                    blocked_until: s.blocked_until,
                })
                .unwrap_or_default())
        })
    }

    fn record_failure(
        &self,
        max_consecutive_failures: u32,
        block_until: DateTime<Utc>,
    ) -> BoxFuture<'_, anyhow::Result<TokenGuardState>> {
        Box::pin(async move {
            let value = self
                .pool
                .count_token_failure(
                    &self.key,
                    i64::from(max_consecutive_failures),
                    block_until,
                    Utc::now(),
                )
                .await?;
            let stored: Stored = serde_json::from_str(&value)?;
            Ok(TokenGuardState {
                consecutive_failures: stored.consecutive_failures,
                blocked_until: stored.blocked_until,
            })
        })
    }

    fn reset(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            let value = serde_json::to_string(&Stored {
                consecutive_failures: 0,
                blocked_until: None,
            })?;
            self.pool.set_state(&self.key, &value).await?;
            Ok(())
        })
    }
}

/// The service client of `account`, its token guard in `pool`, its answers counted in
/// `metrics`; an error names the key at fault (typically a missing
/// `service.client_secret`).
pub fn service_client(
    account: &Account,
    pool: impl Into<Pool>,
    metrics: Arc<Metrics>,
) -> Result<ServiceClient, ClientError> {
    let config = ClientConfig::from_settings(&account.service)?.counted_in(metrics, &account.id);
    let guard = DbTokenGuardStore::of_account(pool, &account.id);
    ServiceClient::with_guard_store(config, Arc::new(guard))
}
