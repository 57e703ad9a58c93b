//! Request and response models of the service's v3 API, with the documented enumerations
//! and discriminated unions. The sandbox serves the same types, so one definition fixes the
//! wire shape for both sides; tests check that shape against the document with raw JSON.

mod common;
mod integrations;
mod leads;
mod resources;
mod webhooks;

pub use common::*;
pub use integrations::*;
pub use leads::*;
pub use resources::*;
pub use webhooks::*;
