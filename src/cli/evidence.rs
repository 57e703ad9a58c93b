//! `ledger verify`, `evidence` and `prune`: what makes the ledger stand as evidence.

use serde::Serialize;

use super::{CliError, open};
use crate::chain::{self, Break, ChainHead};
use crate::settings::Settings;

/// `ledger verify --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    intact: bool,
    /// The last entry checked: the head when intact, the last good entry otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    head: Option<ChainHead>,
    #[serde(skip_serializing_if = "Option::is_none")]
    broken_at: Option<Break>,
}

/// Walks the chain: exit 0 with the head, exit 1 naming the first entry that breaks it.
pub async fn verify(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let outcome = chain::verify(&pool).await.map_err(anyhow::Error::from)?;
    if json {
        let report = match &outcome {
            Ok(head) => Verified {
                intact: true,
                head: Some(head.clone()),
                broken_at: None,
            },
            Err(broken) => Verified {
                intact: false,
                head: None,
                broken_at: Some(broken.clone()),
            },
        };
        super::read::print_json(&report)?;
    }
    match outcome {
        Ok(head) => {
            if !json {
                println!(
                    "ledger intact: every entry up to seq {} matches its hash; head {}",
                    head.seq, head.hash
                );
            }
            Ok(())
        }
        Err(broken) => Err(CliError::Runtime(anyhow::anyhow!("{broken}"))),
    }
}
