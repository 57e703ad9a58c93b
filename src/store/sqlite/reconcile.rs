//! The reconciler's bookkeeping on SQLite (the statements: [`crate::store::reconcile`]):
//! a pass's times and summary are kept as the text they are bound as.

/// The cast of a time bound as RFC 3339 text: none.
pub(crate) const AS_TIME: &str = "";
/// The cast of JSON bound as text: none.
pub(crate) const AS_JSON: &str = "";
