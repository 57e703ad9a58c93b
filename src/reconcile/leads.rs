//! The leads pass of one organization: pages fetched ahead, each written in one short
//! transaction together with the cursor of the next.

use super::*;
use crate::client::CursorTrail;

/// One page of leads as fetched, with the cursor of the next page (none at the end).
pub(super) struct LeadsPage {
    pub(super) leads: Vec<Lead>,
    pub(super) fetched_at: DateTime<Utc>,
    pub(super) next: Option<String>,
}

/// Why an organization's leads pass ended early.
#[derive(Debug, thiserror::Error)]
pub(super) enum LeadsPassError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Database(#[from] crate::store::Error),
    #[error("fetching a page: {0}")]
    Fetch(#[from] tokio::task::JoinError),
    /// v2 answered 422: it pages no deeper than 100,000 objects.
    #[error(
        "stopped after {scanned} leads: the v2 API pages no further than 100,000 leads of an \
         organization (it answered 422: {message}), so the leads past them were not \
         reconciled; v3 has no such limit (set [service] api_version = \"v3\")"
    )]
    DepthLimit { scanned: i64, message: String },
}

impl Reconciler {
    pub(super) async fn leads_pass(
        &self,
        pass_id: &str,
        organization: &str,
        shutdown: &CancellationToken,
        summary: &mut PassSummary,
    ) -> Result<(), LeadsPassError> {
        let saved = self.checkpoint(pass_id, organization).await?;
        let restart = saved.is_some();
        let cursor = self.source.resume(saved);
        if restart && cursor.is_none() {
            self.pool
                .restart_checkpoint(&self.account, organization)
                .await?;
        }
        let mut conn = self.pass_connection().await?;
        let outcome = self
            .pages(&mut conn, pass_id, organization, cursor, shutdown, summary)
            .await;
        conn.close().await;
        match outcome {
            Err(LeadsPassError::Client(ClientError::CursorDepthExceeded { message })) => {
                Err(self.stop_at_depth(pass_id, organization, message).await?)
            }
            other => other,
        }
    }

    /// A connection for one leads pass. On SQLite it has a bounded page cache
    /// ([`PAGE_CACHE_KIB`]) and a checkpoint interval of its own, its cache going with it
    /// at the end.
    pub(super) async fn pass_connection(&self) -> Result<Connection, crate::store::Error> {
        self.pool
            .bulk_connection(PAGE_CACHE_KIB, PASS_CHECKPOINT_PAGES)
            .await
    }

    /// Applies the page at `cursor` and every page after it, each next page fetched while
    /// the current one is written; stops at the last page, at a shutdown, or at the first
    /// failure.
    pub(super) async fn pages(
        &self,
        conn: &mut Connection,
        pass_id: &str,
        organization: &str,
        cursor: Option<String>,
        shutdown: &CancellationToken,
        summary: &mut PassSummary,
    ) -> Result<(), LeadsPassError> {
        let fetch = |cursor| {
            AbortOnDropHandle::new(tokio::spawn(
                self.source.clone().page(organization.to_owned(), cursor),
            ))
        };
        // A service whose cursors go round (A, B, A...) would keep a pass paging for ever.
        let mut trail = CursorTrail::new("/leads", cursor.as_deref());
        let mut page = fetch(cursor).await??;
        loop {
            if let Some(next) = &page.next {
                trail.follow(next)?;
            }
            let next = match &page.next {
                Some(cursor) if !shutdown.is_cancelled() => Some(fetch(Some(cursor.clone()))),
                _ => None,
            };
            let counts = self.apply_page(conn, pass_id, organization, &page).await?;
            summary.leads_scanned += counts.scanned;
            summary.leads_new += counts.new;
            summary.repaired += counts.repaired;
            summary.suppressed += counts.suppressed;
            match next {
                Some(next) => page = next.await??,
                None if page.next.is_some() => {
                    summary.interrupted = true;
                    return Ok(());
                }
                None => return Ok(()),
            }
        }
    }

    /// Ends the scan of an organization v2 will not page further: what was scanned is
    /// recorded with the error, and the checkpoint goes, so the next pass starts again from
    /// the first page instead of asking past the limit again.
    pub(super) async fn stop_at_depth(
        &self,
        pass_id: &str,
        organization: &str,
        message: String,
    ) -> Result<LeadsPassError, crate::store::Error> {
        let describe = |scanned| LeadsPassError::DepthLimit { scanned, message };
        self.pool
            .end_with_error(&self.account, pass_id, organization, Utc::now(), describe)
            .await
    }

    /// The cursor to resume `organization` from, starting a checkpoint if there is none.
    pub(super) async fn checkpoint(
        &self,
        pass_id: &str,
        organization: &str,
    ) -> Result<Option<String>, crate::store::Error> {
        self.pool
            .checkpoint(&self.account, pass_id, organization, Utc::now())
            .await
    }

    /// Writes one page in one transaction: lead fields, consent differences as `reconcile`
    /// observations timed at the fetch, and the cursor of the next page (or the end).
    #[tracing::instrument(
        name = "leads_page",
        skip_all,
        fields(organization = %organization, pass = pass_id, leads = page.leads.len())
    )]
    pub(super) async fn apply_page(
        &self,
        conn: &mut Connection,
        pass_id: &str,
        organization: &str,
        page: &LeadsPage,
    ) -> Result<PageApplied, crate::store::Error> {
        let LeadsPage {
            leads,
            fetched_at,
            next,
        } = page;
        let mut tx = conn.begin_write().await?;
        let account = &self.account;
        let counts = apply::lead_page(&mut tx, account, pass_id, leads, *fetched_at).await?;
        tx.page_written(checkpoint_of(account, pass_id, organization, next, &counts))
            .await?;
        tx.commit().await?;
        crate::signal::ledger_grew();
        Ok(counts)
    }
}

/// Where the pass stands once `counts`' page is written.
fn checkpoint_of<'a>(
    account: &'a str,
    pass_id: &'a str,
    organization: &'a str,
    next: &'a Option<String>,
    counts: &PageApplied,
) -> PageCheckpoint<'a> {
    PageCheckpoint {
        account,
        pass_id,
        organization,
        next: next.as_deref(),
        scanned: counts.scanned as i64,
        repaired: counts.repaired as i64,
        now: Utc::now(),
    }
}
