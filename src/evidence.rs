//! The evidence bundle of a number: every ledger entry with its hash, the hash before it,
//! and what it stands on (the delivery as received, the lead as fetched, or who made the
//! change), so that a reader can check each claim without this code.

use crate::model::Timestamp;
use crate::model::{PushState, Source};
use crate::store::EvidenceStore;
use crate::store::codec;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::ledger::chain;
use crate::model::chain::{ChainHead, GENESIS};
use crate::model::{KeptDelivery, KeptEvidence, LedgerEntry, StoredEntry};
use crate::store::Pool;

/// How the bundle's hashes are computed, said in the bundle itself for its reader.
pub const CANONICAL_ENCODING: &str = "hash = lowercase hex SHA-256 of the UTF-8 bytes of the compact JSON array \
     [prevHash, seq, organizationId, leadId, phoneNumber, optedOut, occurredAt, recordedAt, \
     source, eventRef, superseded, tagId, reason] (no whitespace; strings escaped as JSON with \
     only \", \\ and control characters escaped; prevHash of the first entry is 64 zeros)";

/// `evidence PHONE` and `GET /v1/consent/evidence`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    pub phone_number: String,
    pub generated_at: String,
    /// The ledger's last entry when the bundle was made.
    pub chain_head: ChainHead,
    pub canonical_encoding: &'static str,
    pub items: Vec<Item>,
}

/// One ledger entry of the bundle.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    #[serde(flatten)]
    pub entry: LedgerEntry,
    /// The two chained fields the ledger entry record does not show.
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    /// The hash of the entry before it in seq order.
    pub prev_hash: String,
    pub hash: Option<String>,
    pub evidence: Evidence,
}

/// What an entry stands on, by its source.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Evidence {
    Webhook(WebhookEvidence),
    Reconcile(ReconcileEvidence),
    Local(LocalEvidence),
}

/// A webhook entry's delivery, exactly as received.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEvidence {
    /// The outbox id; `None` once the delivery is no longer kept.
    pub delivery_id: Option<i64>,
    pub received_at: Option<Timestamp>,
    /// The headers kept with it (the signature's among them).
    pub headers: Option<Value>,
    /// The exact bytes received, so the signature can be checked again with the secret.
    pub body_base64: Option<String>,
    /// Which configured `webhook.secrets` entry (from 0) verified it.
    pub secret_index: Option<i64>,
    /// Whether the delivery is still kept.
    pub kept: bool,
    /// Why it is not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A reconciliation entry: when the lead was asked for, and what came back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileEvidence {
    pub requested_at: Timestamp,
    /// `None` for entries recorded before leads were kept with them.
    pub lead: Option<Value>,
}

/// A local change: who made it and why, and where its push to the service stands.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalEvidence {
    /// The admin token's name, or `cli:USER`; `None` for changes recorded before actors
    /// were kept.
    pub actor: Option<String>,
    pub reason: Option<String>,
    pub push: Option<PushState>,
}

/// The bundle of `phone` (in one organization or all); `None` when the ledger has no entry
/// of it.
pub async fn bundle(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<Bundle>, crate::store::Error> {
    let pool = pool.into();
    // The head first: every entry of the bundle is at or below it.
    let chain_head = chain::head(&pool).await?;
    let entries: Vec<StoredEntry> = pool.evidence_entries(phone, organization).await?;
    if entries.is_empty() {
        return Ok(None);
    }
    let keys: Vec<&str> = entries
        .iter()
        .filter(|e| e.entry.source == Source::Webhook)
        .map(|e| e.entry.event_ref.as_str())
        .collect();
    let deliveries: Vec<KeptDelivery> = pool.evidence_deliveries(&keys).await?;
    let pruned_before = crate::retention::consent_pruned_before(&pool).await?;
    let items = entries
        .into_iter()
        .map(|stored| {
            let evidence = evidence_of(&stored, &deliveries, pruned_before.as_deref());
            Item {
                prev_hash: stored.prev_hash.unwrap_or_else(|| GENESIS.to_owned()),
                entry: stored.entry,
                tag_id: stored.tag_id,
                reason: stored.reason,
                hash: stored.hash,
                evidence,
            }
        })
        .collect();
    Ok(Some(Bundle {
        phone_number: phone.to_owned(),
        generated_at: codec::timestamp(now),
        chain_head,
        canonical_encoding: CANONICAL_ENCODING,
        items,
    }))
}

fn evidence_of(
    stored: &StoredEntry,
    deliveries: &[KeptDelivery],
    pruned_before: Option<&str>,
) -> Evidence {
    let kept: Option<KeptEvidence> = stored
        .evidence
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok());
    let entry = &stored.entry;
    match entry.source {
        Source::Reconcile => match kept {
            Some(KeptEvidence::Reconcile { requested_at, lead }) => {
                Evidence::Reconcile(ReconcileEvidence {
                    requested_at,
                    lead: Some(lead),
                })
            }
            // A reconciliation entry's event time is the time of the request.
            _ => Evidence::Reconcile(ReconcileEvidence {
                requested_at: entry.occurred_at,
                lead: None,
            }),
        },
        Source::Local => Evidence::Local(LocalEvidence {
            actor: match kept {
                Some(KeptEvidence::Local { actor }) => Some(actor),
                _ => None,
            },
            reason: stored.reason.clone(),
            push: entry.push,
        }),
        _ => match deliveries.iter().find(|d| d.dedup_key == entry.event_ref) {
            Some(d) => Evidence::Webhook(WebhookEvidence {
                delivery_id: Some(d.id),
                received_at: Some(d.received_at),
                headers: serde_json::from_str(&d.headers).ok(),
                body_base64: Some(STANDARD.encode(&d.body)),
                secret_index: Some(d.secret_index),
                kept: true,
                note: None,
            }),
            None => Evidence::Webhook(WebhookEvidence {
                delivery_id: None,
                received_at: None,
                headers: None,
                body_base64: None,
                secret_index: None,
                kept: false,
                note: Some(missing_delivery(pruned_before)),
            }),
        },
    }
}

/// Why a webhook entry's delivery is not in the bundle.
fn missing_delivery(pruned_before: Option<&str>) -> String {
    match pruned_before {
        Some(before) => format!(
            "the delivery was pruned after retention.consent_delivery_days: applied deliveries received up to {before} are no longer kept; the entry and its hash remain"
        ),
        None => "the stored delivery is not in the outbox (removed by hand, or recorded from a copy without it)".to_owned(),
    }
}
