//! The sources in force, looked up by name where a reply posted to one is verified (ingest)
//! and recorded (the apply path of the outbox writer and the worker): a reload replaces the
//! list whole, and every later lookup sees the new one.

use std::sync::Arc;

use super::sourced::Recorder;
use crate::model::AccountId;
use crate::settings::{Live, SourceSettings};

/// The configured sources and the accounts served.
#[derive(Debug, Clone)]
pub struct InForce {
    /// Replaced whole by a reload.
    pub sources: Live<Vec<SourceSettings>>,
    pub served: Arc<[AccountId]>,
    /// Where a number a reply is posted from is read when it has no country code (`[consent]
    /// default_region`).
    pub region: crate::model::phone::Region,
}

impl Default for InForce {
    fn default() -> Self {
        Self::new(Vec::new(), Vec::new())
    }
}

impl InForce {
    pub fn new(sources: Vec<SourceSettings>, served: Vec<AccountId>) -> Self {
        Self {
            sources: Live::new(sources),
            served: served.into(),
            region: crate::model::phone::Region::default(),
        }
    }

    /// Reads the numbers replies are posted from in `region`.
    pub fn reading_in(mut self, region: crate::model::phone::Region) -> Self {
        self.region = region;
        self
    }

    /// Source `name` as configured now, when it is one the system posts to (Twilio).
    pub fn posted(&self, name: &str) -> Option<SourceSettings> {
        self.sources
            .current()
            .iter()
            .find(|s| s.name == name && !s.system.polled())
            .cloned()
    }

    /// The own revocation words of source `name` (`opt_out_words`), as configured now.
    pub fn words(&self, name: &str) -> Vec<String> {
        match self.posted(name).map(|s| s.system) {
            Some(crate::settings::SourceSystem::Twilio(twilio)) => twilio.opt_out_words,
            _ => Vec::new(),
        }
    }

    /// Where what was posted to source `name` is recorded, as configured now.
    pub fn recorder(&self, name: &str) -> Option<Recorder> {
        self.posted(name).map(|s| Recorder::of(&s, &self.served))
    }

    /// The account an outbox row of a reply posted to `source` is kept under: the first it
    /// holds in.
    pub fn keeper(&self, source: &SourceSettings) -> AccountId {
        source
            .targets(&self.served)
            .into_iter()
            .next()
            .unwrap_or_else(AccountId::default_account)
    }
}
