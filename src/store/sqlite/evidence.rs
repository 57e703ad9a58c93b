//! What the evidence bundle reads on SQLite: a number's ledger entries with their hashes
//! and kept evidence, and the stored deliveries they came from (the statements:
//! [`crate::store::read`]).

/// The stored deliveries of the dedup keys bound as `$1`.
pub(crate) const DELIVERIES: &str =
    "SELECT o.id, o.dedup_key, o.received_at, o.headers, o.body, o.secret_index,
            o.verified_header, o.account_id
         FROM (SELECT DISTINCT value FROM json_each($1)) AS k
         JOIN outbox AS o ON o.dedup_key = k.value";
