//! The reconciler's bookkeeping on PostgreSQL (the statements: [`crate::store::reconcile`]):
//! a pass's times are kept as `timestamptz` and its summary as `jsonb`.

/// The cast of a time bound as RFC 3339 text.
pub(crate) const AS_TIME: &str = "::TIMESTAMPTZ";
/// The cast of JSON bound as text.
pub(crate) const AS_JSON: &str = "::JSONB";
