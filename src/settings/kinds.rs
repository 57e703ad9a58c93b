//! Each kind's own keys: a struct in the kind's folder under `src/systems/` (with the rest
//! of the kind), compiled here, in the settings layer, because settings are typed and
//! checked once, when they are read. Such a file imports the model and the settings alone
//! (`tests/it/architecture.rs` reads it as this module).

#[path = "../systems/twilio/settings.rs"]
pub mod twilio;
