//! The evidence bundle of a number: every ledger entry with its hash, the hash before it,
//! and what it stands on (the delivery as received, the lead as fetched, or who made the
//! change), so that a reader can check each claim without this code.

use crate::model::Timestamp;
use crate::model::{PushState, Scope, Source};
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EvidenceBundle)]
pub struct Bundle {
    pub phone_number: String,
    pub generated_at: String,
    /// The ledger's last entry when the bundle was made.
    pub chain_head: ChainHead,
    pub canonical_encoding: &'static str,
    pub items: Vec<Item>,
}

/// One ledger entry of the bundle.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EvidenceItem)]
pub struct Item {
    #[serde(flatten)]
    pub entry: LedgerEntry,
    /// The two chained fields the ledger entry record does not show.
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    /// The hash of the entry before it in seq order.
    pub prev_hash: String,
    pub hash: Option<String>,
    /// By source: webhook (the delivery as received: deliveryId, receivedAt, headers,
    /// headersReceived, verifiedHeader, bodyBase64, secretIndex, kept, note), reconcile
    /// (requestedAt, lead, followsPush), import (file, sha256, line, actor, reason), local (actor,
    /// reason, push, suppressedBy), van and action_network (actor, record, standsOn).
    #[schema(value_type = Object)]
    pub evidence: Evidence,
}

/// What an entry stands on, by its source.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Evidence {
    Webhook(WebhookEvidence),
    Reconcile(ReconcileEvidence),
    Import(ImportEvidence),
    Local(LocalEvidence),
    Read(ReadEvidence),
}

/// An entry a `[[source]]` read back: the source's name, the record it read (recorded once)
/// and what it stands on there (VAN: job id, file SHA-256, row and the row; Action Network:
/// the person's identifier, `modified_date` and the person as read).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadEvidence {
    pub actor: Option<String>,
    pub record: Option<String>,
    pub stands_on: Option<serde_json::Value>,
    /// A reply posted to a source (Twilio): the post exactly as received, its verified
    /// signature among its headers, as a webhook's delivery is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<WebhookEvidence>,
}

/// An imported entry: the list it came from (its name as given and the SHA-256 of its
/// exact bytes), the line, who imported it and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportEvidence {
    pub file: Option<String>,
    pub sha256: Option<String>,
    pub line: Option<u64>,
    pub actor: Option<String>,
    pub reason: Option<String>,
}

/// A webhook entry's delivery, exactly as received.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEvidence {
    /// The outbox id; `None` once the delivery is no longer kept.
    pub delivery_id: Option<i64>,
    pub received_at: Option<Timestamp>,
    /// The headers kept with it as an object, one value per name: the value verification
    /// read (for the signature header, the one that verified; else the first of a repeated
    /// name), so that a check of the signature with one value per header gives the same
    /// answer. Deliveries stored before every header was kept show the object they were
    /// stored with (the last value of a repeated name).
    pub headers: Option<Value>,
    /// Every header kept, `[name, value]` as received: names in the order they first
    /// appeared, the values of a repeated name in order. `None` for deliveries stored
    /// before the order was kept.
    pub headers_received: Option<Vec<(String, String)>>,
    /// The signature header's value that verified, and its place in `headersReceived`.
    pub verified_header: Option<VerifiedHeader>,
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

/// The header value a delivery's signature verified with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedHeader {
    pub name: String,
    pub value: String,
    /// Its place in `headersReceived` (from 0).
    pub index: usize,
}

/// The stored `headers` of a delivery, as the bundle gives them.
#[derive(Debug, PartialEq)]
struct StoredHeaders {
    object: Option<Value>,
    /// Not known for a delivery stored as an object.
    received: Option<Vec<(String, String)>>,
    verified: Option<VerifiedHeader>,
}

/// Reads the `headers` column (pairs, or the object of older deliveries) and the place of
/// the value that verified.
fn stored_headers(text: &str, verified_at: Option<i64>) -> StoredHeaders {
    let pairs: Vec<(String, String)> = match serde_json::from_str(text) {
        Ok(pairs) => pairs,
        // Stored before every header was kept: an object, given as it is.
        Err(_) => {
            return StoredHeaders {
                object: serde_json::from_str(text).ok(),
                received: None,
                verified: None,
            };
        }
    };
    let verified = verified_at
        .and_then(|at| usize::try_from(at).ok())
        .and_then(|index| {
            let (name, value) = pairs.get(index)?;
            Some(VerifiedHeader {
                name: name.clone(),
                value: value.clone(),
                index,
            })
        });
    let mut object = serde_json::Map::new();
    for (name, value) in &pairs {
        if !object.contains_key(name) {
            object.insert(name.clone(), Value::String(value.clone()));
        }
    }
    if let Some(v) = &verified {
        object.insert(v.name.clone(), Value::String(v.value.clone()));
    }
    StoredHeaders {
        object: Some(Value::Object(object)),
        received: Some(pairs),
        verified,
    }
}

/// A reconciliation entry: when the lead was asked for, and what came back.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileEvidence {
    pub requested_at: Timestamp,
    /// `None` for entries recorded before leads were kept with them.
    pub lead: Option<Value>,
    /// An opt-in found at the service after the suppression's push it names was answered:
    /// the person's, given since (CONTRACT: suppression).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows_push: Option<i64>,
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
    /// With actor `suppression`: the entry that opted the number out before the lead
    /// appeared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed_by: Option<i64>,
    /// With actor `shared`: the opt-out it copies, as (entry, account).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows_account_id: Option<String>,
    /// With actor `shared` by a `[[caller]]`: the caller, and the rule that binds its
    /// members.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// The bundle of `phone` (in one organization or all); `None` when the ledger has no entry
/// of it.
pub async fn bundle(
    pool: impl Into<Pool>,
    phone: &str,
    scope: Scope<'_>,
    now: DateTime<Utc>,
) -> Result<Option<Bundle>, crate::store::Error> {
    let pool = pool.into();
    // The head first: every entry of the bundle is at or below it.
    let chain_head = chain::head(&pool).await?;
    let mut entries: Vec<StoredEntry> = pool.evidence_entries(phone, scope.organization).await?;
    entries.retain(|e| scope.holds_account(&e.entry.account_id));
    if entries.is_empty() {
        return Ok(None);
    }
    let posts: Vec<String> = entries.iter().filter_map(post_of).collect();
    let keys: Vec<&str> = entries
        .iter()
        .filter(|e| e.entry.source == Source::Webhook || e.entry.source.posted())
        .map(|e| e.entry.event_ref.as_str())
        .chain(posts.iter().map(String::as_str))
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
            Some(KeptEvidence::Reconcile {
                requested_at,
                lead,
                follows_push,
            }) => Evidence::Reconcile(ReconcileEvidence {
                requested_at,
                lead: Some(lead),
                follows_push,
            }),
            // A reconciliation entry's event time is the time of the request.
            _ => Evidence::Reconcile(ReconcileEvidence {
                requested_at: entry.occurred_at,
                lead: None,
                follows_push: None,
            }),
        },
        Source::Local => Evidence::Local(local_evidence(stored, kept)),
        Source::Import => Evidence::Import(import_evidence(stored, kept)),
        Source::Webhook => Evidence::Webhook(delivery_evidence(stored, deliveries, pruned_before)),
        // What the sources read back (`Source::read_back`).
        _ => Evidence::Read(match kept {
            Some(KeptEvidence::Read {
                actor,
                record,
                stands_on,
            }) => ReadEvidence {
                actor: Some(actor),
                record: Some(record),
                stands_on: Some(stands_on),
                delivery: posted(stored, deliveries, pruned_before),
            },
            _ => ReadEvidence {
                actor: None,
                record: None,
                stands_on: None,
                delivery: posted(stored, deliveries, pruned_before),
            },
        }),
    }
}

/// The outbox key of the post of several records an entry of a posted source came in,
/// which its evidence names (`standsOn.post`: [`crate::apply::POST`]); `None` when the post
/// is kept under the entry's `event_ref`, as a post of one record is.
fn post_of(stored: &StoredEntry) -> Option<String> {
    if !stored.entry.source.posted() {
        return None;
    }
    let kept: serde_json::Value = serde_json::from_str(stored.evidence.as_deref()?).ok()?;
    let post = kept.get("standsOn")?.get(crate::apply::POST)?.as_str()?;
    Some(post.to_owned())
}

/// The post a source was given, for an entry of a source a system posts to.
fn posted(
    stored: &StoredEntry,
    deliveries: &[KeptDelivery],
    pruned_before: Option<&str>,
) -> Option<WebhookEvidence> {
    (stored.entry.source.posted()).then(|| delivery_evidence(stored, deliveries, pruned_before))
}

/// The delivery an entry came in (the row of the outbox whose key is its `event_ref`: of
/// the entry's account for a webhook; a post to a source holds for each of its accounts),
/// or why it is no longer kept.
fn delivery_evidence(
    stored: &StoredEntry,
    deliveries: &[KeptDelivery],
    pruned_before: Option<&str>,
) -> WebhookEvidence {
    let entry = &stored.entry;
    let key = post_of(stored).unwrap_or_else(|| entry.event_ref.clone());
    match deliveries
        .iter()
        .find(|d| d.dedup_key == key && (entry.source.posted() || d.account_id == entry.account_id))
    {
        Some(d) => {
            let headers = stored_headers(&d.headers, d.verified_header);
            WebhookEvidence {
                delivery_id: Some(d.id),
                received_at: Some(d.received_at),
                headers: headers.object,
                headers_received: headers.received,
                verified_header: headers.verified,
                body_base64: Some(STANDARD.encode(&d.body)),
                secret_index: Some(d.secret_index),
                kept: true,
                note: None,
            }
        }
        None => WebhookEvidence {
            delivery_id: None,
            received_at: None,
            headers: None,
            headers_received: None,
            verified_header: None,
            body_base64: None,
            secret_index: None,
            kept: false,
            note: Some(missing_delivery(pruned_before)),
        },
    }
}

/// A local change's evidence: who made it (or the suppression and its entry), why, and its
/// push.
fn local_evidence(stored: &StoredEntry, kept: Option<KeptEvidence>) -> LocalEvidence {
    let mut evidence = LocalEvidence {
        actor: None,
        reason: stored.reason.clone(),
        push: stored.entry.push,
        suppressed_by: None,
        follows: None,
        follows_account_id: None,
        caller: None,
        rule: None,
    };
    match kept {
        Some(KeptEvidence::Local { actor }) => evidence.actor = Some(actor),
        Some(KeptEvidence::Suppressed {
            actor,
            suppressed_by,
        }) => {
            evidence.actor = Some(actor);
            evidence.suppressed_by = Some(suppressed_by);
        }
        Some(KeptEvidence::Shared {
            actor,
            follows,
            account_id,
            caller,
            rule,
        }) => {
            evidence.actor = Some(actor);
            evidence.follows = Some(follows);
            evidence.follows_account_id = Some(account_id);
            evidence.caller = caller;
            evidence.rule = rule;
        }
        _ => {}
    }
    evidence
}

/// An imported entry's evidence: the list, its line, who imported it and why.
fn import_evidence(stored: &StoredEntry, kept: Option<KeptEvidence>) -> ImportEvidence {
    match kept {
        Some(KeptEvidence::Import {
            file,
            sha256,
            line,
            actor,
            reason,
        }) => ImportEvidence {
            file: Some(file),
            sha256: Some(sha256),
            line: Some(line),
            actor: Some(actor),
            reason,
        },
        _ => ImportEvidence {
            file: None,
            sha256: None,
            line: None,
            actor: None,
            reason: stored.reason.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_holds_the_value_that_verified_and_the_pairs_every_value_in_order() {
        let stored =
            r#"[["x-signature","aa"],["x-signature","bb"],["x-trace","1"],["x-trace","2"]]"#;
        let headers = stored_headers(stored, Some(1));
        assert_eq!(
            headers.object,
            Some(serde_json::json!({"x-signature": "bb", "x-trace": "1"}))
        );
        assert_eq!(headers.received.map(|p| p.len()), Some(4));
        assert_eq!(
            headers.verified,
            Some(VerifiedHeader {
                name: "x-signature".into(),
                value: "bb".into(),
                index: 1
            })
        );
    }

    #[test]
    fn a_delivery_stored_as_an_object_is_given_as_it_was_stored() {
        let stored = r#"{"content-type":"application/json","x-signature":"bb"}"#;
        let headers = stored_headers(stored, None);
        assert_eq!(headers.object, serde_json::from_str(stored).ok());
        assert_eq!((headers.received, headers.verified), (None, None));
    }
}
