//! The daemon's one service client, with its token-request guard kept in the database so a
//! restart loop cannot hammer the token endpoint.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::store::Pool;

use crate::client::{ClientConfig, ClientError, ServiceClient, TokenGuardState, TokenGuardStore};
use crate::settings::Settings;

const GUARD_KEY: &str = "token_guard";

/// Keeps [`TokenGuardState`] in `daemon_state`.
#[derive(Debug, Clone)]
pub struct DbTokenGuardStore {
    pool: Pool,
}

impl DbTokenGuardStore {
    pub fn new(pool: impl Into<Pool>) -> Self {
        Self { pool: pool.into() }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    consecutive_failures: u32,
    blocked_until: Option<chrono::DateTime<chrono::Utc>>,
}

impl TokenGuardStore for DbTokenGuardStore {
    fn load(&self) -> BoxFuture<'_, anyhow::Result<TokenGuardState>> {
        Box::pin(async move {
            let value = self.pool.state(GUARD_KEY).await?;
            let stored: Option<Stored> = value.and_then(|v| serde_json::from_str(&v).ok());
            Ok(stored
                .map(|s| TokenGuardState {
                    consecutive_failures: s.consecutive_failures,
                    blocked_until: s.blocked_until,
                })
                .unwrap_or_default())
        })
    }

    fn save(&self, state: TokenGuardState) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            let value = serde_json::to_string(&Stored {
                consecutive_failures: state.consecutive_failures,
                blocked_until: state.blocked_until,
            })?;
            self.pool.set_state(GUARD_KEY, &value).await?;
            Ok(())
        })
    }
}

/// The service client of `settings`, its token guard in `pool`; an error names the key
/// at fault (typically a missing `service.client_secret`).
pub fn service_client(
    settings: &Settings,
    pool: impl Into<Pool>,
) -> Result<ServiceClient, ClientError> {
    let config = ClientConfig::from_settings(&settings.service)?;
    ServiceClient::with_guard_store(config, Arc::new(DbTokenGuardStore::new(pool)))
}
