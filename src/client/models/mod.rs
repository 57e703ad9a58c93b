//! Request and response models of the service's v3 API, with the documented enumerations
//! and discriminated unions. The sandbox serves wire types of its own, written apart from
//! these, so each side checks the other; tests also check the shape with raw JSON.

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
