//! The posted side of a system: [`Posted`], what a `[[source]]` a system posts to
//! (`POST /sources/{name}` on the ingest listener) verifies and reads a post through. The
//! listener (`crate::ingest::posted`) keeps the caps, the deadlines, the sample of refusals,
//! the outbox and the order (verified, durable, then answered) and knows no kind; a kind
//! knows its wire alone: what verifies a post, what its records are, what it is answered.

use chrono::{DateTime, Utc};
use http::HeaderMap;

use crate::model::read::ReadsPost;

/// A system that posts to the daemon (a person's reply to a campaign's number): it
/// verifies a post on its exact bytes and headers against the secrets in force, reads its
/// records ([`ReadsPost`]: the write path reads a stored post again through it), and says
/// what the system is answered.
pub trait Posted: ReadsPost {
    /// The largest post it takes (the listener's `max_body_bytes`, when smaller, wins):
    /// anything larger is refused before a byte of it is verified.
    fn max_body_bytes(&self) -> usize;

    /// The header a post's verification rests on (lowercase): the value the evidence
    /// shows as verified, among the headers kept with the post.
    fn signature_header(&self) -> &'static str;

    /// Which secret in force (its index among them) `body` with `headers` verifies under,
    /// received at `received_at`; `Err` is why it does not, for the sample of refusals
    /// (never a secret). In constant time, wherever a secret is compared.
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        received_at: DateTime<Utc>,
    ) -> Result<usize, String>;

    /// What makes the post one record there, when it can be told from the post (Twilio: its
    /// `MessageSid`): the post is kept under that record's `event_ref`, so the same post
    /// twice is one. `None`: kept under its bytes' SHA-256.
    fn key(&self, body: &[u8]) -> Option<String>;

    /// What the system is answered once the post is durable: its content type and body.
    fn answer(&self) -> (&'static str, &'static str);

    /// What `sources` and `sources check` say of it: what is verified, and with what.
    fn describe(&self) -> Vec<String>;
}
