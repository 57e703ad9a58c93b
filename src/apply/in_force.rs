//! The sources in force, looked up by name where a reply posted to one is verified (ingest)
//! and recorded (the apply path of the outbox writer and the worker): a reload replaces the
//! list whole, and every later lookup sees the new one.

use std::sync::Arc;

use super::sourced::Recorder;
use crate::model::AccountId;
use crate::model::read::ReadsPost;
use crate::settings::{Live, SourceSettings};

/// What reads the posts of a source a system posts to, from its settings (the kind
/// registry's, handed down by whoever builds the daemon: the write path names no kind).
pub type PostReaders = fn(&SourceSettings) -> Option<Arc<dyn ReadsPost>>;

/// The configured sources and the accounts served.
#[derive(Debug, Clone)]
pub struct InForce {
    /// Replaced whole by a reload.
    pub sources: Live<Vec<SourceSettings>>,
    pub served: Arc<[AccountId]>,
    /// Where a number a reply is posted from is read when it has no country code (`[consent]
    /// default_region`).
    pub region: crate::model::phone::Region,
    /// What reads a post of each kind: none, until [`InForce::reading_posts_with`].
    readers: PostReaders,
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
            readers: |_| None,
        }
    }

    /// Reads the posts of the sources systems post to with `readers`.
    pub fn reading_posts_with(mut self, readers: PostReaders) -> Self {
        self.readers = readers;
        self
    }

    /// Reads the numbers replies are posted from in `region`.
    pub fn reading_in(mut self, region: crate::model::phone::Region) -> Self {
        self.region = region;
        self
    }

    /// Source `name` as configured now, when it is one a system posts to.
    pub fn posted(&self, name: &str) -> Option<SourceSettings> {
        self.sources
            .current()
            .iter()
            .find(|s| s.name == name && !s.system.polled())
            .cloned()
    }

    /// What reads the posts of source `name`, as configured now.
    pub fn reader(&self, name: &str) -> Option<Arc<dyn ReadsPost>> {
        self.posted(name).and_then(|s| (self.readers)(&s))
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
