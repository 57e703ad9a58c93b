//! The read side of a system: [`Source`], what a `[[source]]` reads opt-outs back through,
//! and what every reader shares: the window it reads, the records it hands on as it reads
//! them ([`ReadRecord`], a batch at a time through a bounded channel, so that a file of any
//! size costs a batch of memory), its requests with the key ([`SourceApi`]) and its
//! downloads without one ([`SourceApi::download`]), and why a read stops ([`ReadError`]).
//!
//! A reader knows its system's wire alone: what a record is, what makes it one record
//! (recorded once), what it says of a number and when. What is recorded, once, in which
//! accounts, and when the watermark moves are `crate::sources`'.

use chrono::{DateTime, Utc};
use secrecy::SecretString;

use super::{Pending, Stop, http};
pub use crate::model::read::{ReadRecord, Said};

/// Records handed on a batch at a time; the channel is bounded, so a reader waits while
/// what it read is recorded.
pub type Records = tokio::sync::mpsc::Sender<Vec<ReadRecord>>;

/// Records per batch a reader hands on, at most.
pub const BATCH: usize = 2_000;

/// A system opt-outs are read back from: it checks its key and what its reads need
/// ([`Source::check`]) and reads what changed in a window ([`Source::read`]).
pub trait Source: std::fmt::Debug + Send + Sync {
    /// `request` with `key`, as the system takes it.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder;

    /// The system's own words in the JSON body of an error answer.
    fn error_words(&self, body: &serde_json::Value) -> Option<String>;

    /// The system's own words in the text of an error answer: by default, in its JSON
    /// ([`Source::error_words`]); a system that answers in another format reads it here.
    fn error_words_in(&self, text: &str) -> Option<String> {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|json| self.error_words(&json))
    }

    /// Checks the key and what the reads need (resources, fields, result codes), saying
    /// what it found.
    fn check<'a>(&'a self, api: SourceApi<'a>) -> Pending<'a, Result<Vec<String>, ReadError>>;

    /// Reads what changed from `window.from` (to `window.to`), handing every record on
    /// through `out` as read; the watermark to move to once every record handed on is
    /// recorded (a reader that reads behind its window for safety gives less than `to`).
    fn read<'a>(
        &'a self,
        api: SourceApi<'a>,
        window: Window,
        out: Records,
    ) -> Pending<'a, Result<DateTime<Utc>, ReadError>>;
}

/// What a read covers: changes from `from` to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// How long the system may take to prepare what it gives (VAN's export job): the
    /// source's `job_timeout_secs`.
    pub patience: std::time::Duration,
    /// Most pages a listing is followed for (the source's `max_pages`).
    pub max_pages: u64,
    /// The region a number without its country code is read in (`[consent]
    /// default_region`): read by [`crate::model::trust::Trust::number`]'s rule.
    pub region: crate::model::phone::Region,
}

/// A listing followed a page at a time through the links its pages give (Action Network's
/// `_links.next`, Mobilize's `next`), or through pages a reader numbers itself: at most
/// `max_pages` of them, none twice (a `next` that leads back to an earlier page is a
/// listing that never ends), each link on the API's host alone ([`SourceApi::link`]).
pub struct Pages {
    what: &'static str,
    next: Option<reqwest::Url>,
    seen: std::collections::HashSet<reqwest::Url>,
    pages: u64,
    max_pages: u64,
}

impl Pages {
    /// The listing `what` (`"the people"`), from its first page `first`.
    pub fn new(what: &'static str, first: reqwest::Url, window: &Window) -> Self {
        Self {
            what,
            next: Some(first),
            seen: std::collections::HashSet::new(),
            pages: 0,
            max_pages: window.max_pages,
        }
    }

    /// The URL of the next page to read, `None` once the listing ended; an error past
    /// `max_pages`, or when it was read before.
    pub fn next_page(&mut self) -> Result<Option<reqwest::Url>, ReadError> {
        let Some(url) = self.next.take() else {
            return Ok(None);
        };
        self.pages += 1;
        if self.pages > self.max_pages {
            return Err(ReadError::Input(format!(
                "{} listing goes on past max_pages ({}): stopped; raise max_pages for a first read this large",
                self.what, self.max_pages
            )));
        }
        if !self.seen.insert(url.clone()) {
            return Err(ReadError::Input(format!(
                "{} listing does not end: page {}'s link repeats an earlier page's",
                self.what, self.pages
            )));
        }
        Ok(Some(url))
    }

    /// The page the page just read leads to (`None`: it was the last).
    pub fn then(&mut self, next: Option<reqwest::Url>) {
        self.next = next;
    }

    /// Pages read so far.
    pub fn read(&self) -> u64 {
        self.pages
    }
}

/// What one item of a listing (a person) holds: when it last changed, if it says, and its
/// records.
pub struct Listed {
    pub modified: Option<DateTime<Utc>>,
    pub records: Vec<ReadRecord>,
}

/// A listing read to its end from `first`, a page at a time ([`Pages`]): `read` gives a
/// page's items and the link to the next page from its text (as the page wrote the link,
/// resolved by [`SourceApi::link`]; a reader that numbers its pages gives the next one's
/// URL); each page's records are handed on as read. The watermark to move to: the latest
/// change an item said, not before `window.from`.
pub async fn read_listing(
    api: &SourceApi<'_>,
    (what, first): (&'static str, reqwest::Url),
    window: &Window,
    out: &Records,
    read: impl Fn(&str) -> Result<(Vec<Listed>, Option<String>), ReadError>,
) -> Result<DateTime<Utc>, ReadError> {
    let mut pages = Pages::new(what, first, window);
    let mut watermark = window.from;
    // Handed on [`BATCH`] at a time, not a page at a time: a page of 100 is too few to
    // record in a transaction of its own.
    let mut records = Vec::new();
    let walked = async {
        while let Some(url) = pages.next_page()? {
            let (items, next) = read(&api.get_text_at(url, what).await?)?;
            for item in items {
                if let Some(at) = item.modified {
                    watermark = watermark.max(at);
                }
                records.extend(item.records);
            }
            if records.len() >= BATCH {
                hand_on(out, std::mem::take(&mut records)).await?;
            }
            pages.then(match next.as_deref().map(str::trim) {
                Some(href) if !href.is_empty() => Some(api.link(href)?),
                _ => None,
            });
        }
        Ok::<_, ReadError>(())
    }
    .await;
    // What the pages read held is recorded, whether or not the listing ended well.
    hand_on(out, records).await?;
    walked.map(|()| watermark)
}

/// A page's JSON, `what` naming it in the error (tried again: a page cut short or garbled
/// by a proxy may come whole next time).
pub fn json_page<P: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<P, ReadError> {
    serde_json::from_str(text).map_err(|error| {
        ReadError::Stop(Stop::retry(format!(
            "{what}: the answer is not the JSON expected: {error}"
        )))
    })
}

/// Hands `records` on (nothing when there are none); an error when the recorder stopped.
pub async fn hand_on(out: &Records, records: Vec<ReadRecord>) -> Result<(), ReadError> {
    if records.is_empty() {
        return Ok(());
    }
    out.send(records)
        .await
        .map_err(|_| ReadError::Input("the recorder stopped".to_owned()))
}

/// A number of a system that writes its numbers country code first without `+` (Action
/// Network's `442079460958`, Mobile Commons' `15555550100`), in E.164, by the rule of every
/// number the daemon hears: a number of `region` first (`2025550103` and `12025550103` are
/// `+12025550103` in the US), so that a national number is never read as another country's
/// (`+20` for Egypt); only digits that are no number of the region are read as country code
/// first.
pub fn number_code_first(
    written: &str,
    region: crate::model::phone::Region,
) -> Result<String, String> {
    let written = written.trim();
    match number_of(written, region) {
        Err(error) if !written.starts_with('+') && !written.is_empty() => {
            number_of(&format!("+{written}"), region).map_err(|_| error)
        }
        read => read,
    }
}

/// A number a system wrote, in E.164: by the rule of every number the daemon hears, one
/// without its country code is one of `region` (`2025550103` is `+12025550103` in the US),
/// never another country's. The error names the number, bounded.
pub fn number_of(written: &str, region: crate::model::phone::Region) -> Result<String, String> {
    crate::model::phone::normalize(written.trim(), region)
        .map(crate::model::phone::E164::into_string)
        .map_err(|e| format!("number {}: {e}", crate::model::text::bounded(written, 40)))
}

/// Why a read stopped. Nothing is lost: the watermark stays where it was, and what was
/// recorded before is not recorded again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The key does not work, a lookup misses, or the system is out of reach: tried again
    /// at the next run (sooner, with the backoff, when it may pass by itself).
    #[error("{0}")]
    Stop(Stop),
    /// The watermark is older than what the system keeps (VAN: 90 days): read again from a
    /// date with `sources resync NAME --since DATE`.
    #[error("{0}")]
    TooOld(String),
    /// What the system gave cannot be read (a file without a column it needs, a listing
    /// that does not end): tried again at the next run.
    #[error("{0}")]
    Input(String),
}

impl From<Stop> for ReadError {
    fn from(stop: Stop) -> Self {
        Self::Stop(stop)
    }
}

/// A source's requests: to its API with its key, at its rate; downloads without it.
pub struct SourceApi<'a> {
    pub(crate) http: &'a reqwest::Client,
    /// The API's root, without a trailing `/`.
    pub(crate) base_url: &'a str,
    pub(crate) key: &'a SecretString,
    pub(crate) timeout: std::time::Duration,
    pub(crate) system: &'a dyn Source,
    pub(crate) limiter: Option<&'a governor::DefaultDirectRateLimiter>,
}

impl SourceApi<'_> {
    /// The URL of `path`, one of the reader's own paths under the API's root (`/people`).
    pub fn url(&self, path: &str) -> Result<reqwest::Url, ReadError> {
        if !path.starts_with('/') {
            return self.link(path);
        }
        reqwest::Url::parse(&format!("{}{path}", self.base_url)).map_err(|_| {
            ReadError::Input(format!(
                "{} is not a URL",
                crate::model::text::quoted(self.base_url)
            ))
        })
    }

    /// The URL of a link an answer gave (a `next` page), resolved against the API's root
    /// by [`http::resolve_link`]: a link that leads away from its host is an error, and the
    /// key is never sent there.
    pub fn link(&self, href: &str) -> Result<reqwest::Url, ReadError> {
        http::resolve_link(self.base_url, href).map_err(|e| ReadError::Input(e.to_string()))
    }

    async fn turn(&self) {
        if let Some(limiter) = self.limiter {
            limiter.until_ready().await;
        }
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        self.system
            .authorize(request.timeout(self.timeout), self.key)
    }

    /// The JSON a GET of `path` answers, `what` naming it in errors.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        what: &str,
    ) -> Result<T, ReadError> {
        self.get_json_at(self.url(path)?, what).await
    }

    /// The JSON a GET of `url` (from [`SourceApi::url`] or [`SourceApi::link`]) answers.
    pub async fn get_json_at<T: serde::de::DeserializeOwned>(
        &self,
        url: reqwest::Url,
        what: &str,
    ) -> Result<T, ReadError> {
        self.turn().await;
        let request = self.authorized(self.http.get(url));
        let words = |body: &serde_json::Value| self.system.error_words(body);
        Ok(http::read_json_with(request, what, &words).await?)
    }

    /// The text a GET of `url` (from [`SourceApi::url`] or [`SourceApi::link`]) answers,
    /// bounded ([`http::MAX_ANSWER`]): for a system that answers in XML.
    pub async fn get_text_at(&self, url: reqwest::Url, what: &str) -> Result<String, ReadError> {
        self.turn().await;
        let request = self.authorized(self.http.get(url));
        let words = |text: &str| self.system.error_words_in(text);
        Ok(http::read_text_with(request, what, &words).await?)
    }

    /// The JSON a POST of `body` to `path` answers, `what` naming it in errors.
    pub async fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
        what: &str,
    ) -> Result<T, ReadError> {
        self.turn().await;
        let request = self.authorized(self.http.post(self.url(path)?).json(body));
        let words = |body: &serde_json::Value| self.system.error_words(body);
        Ok(http::read_json_with(request, what, &words).await?)
    }

    /// A GET of a file at `url`, which is not the API's: sent with no credential of any
    /// kind, whatever host it names. The answer's body is the caller's to read, bounded.
    pub async fn download(&self, url: &str, what: &str) -> Result<reqwest::Response, ReadError> {
        let response = self.http.get(url).send().await.map_err(|error| {
            ReadError::Stop(Stop::Retry {
                error: format!("{what}: {}", http::transport_error(error)),
                retry_after: None,
            })
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = crate::model::text::bounded(
            &http::prefix(response, http::MAX_ERROR_BODY).await,
            http::MAX_ERROR_BODY,
        );
        let error = if status.is_redirection() {
            format!("{what}: answered {status}: redirects are not followed")
        } else {
            format!("{what}: answered {status}: {text}")
        };
        Err(match status.as_u16() {
            // An expired link: the next run makes a new job, whose links are new.
            400..=499 => ReadError::Input(error),
            _ => ReadError::Stop(Stop::Retry {
                error,
                retry_after: None,
            }),
        })
    }
}
