//! What the evidence bundle reads on PostgreSQL: a number's ledger entries with their
//! hashes and kept evidence, and the stored deliveries they came from (the statements:
//! [`crate::store::read`]).

/// The stored deliveries of the dedup keys bound as `$1`.
pub(crate) const DELIVERIES: &str =
    "SELECT id, dedup_key, received_at, headers::text AS headers, body,
            secret_index::BIGINT AS secret_index,
            verified_header::BIGINT AS verified_header, account_id
         FROM outbox WHERE dedup_key = ANY($1)";
