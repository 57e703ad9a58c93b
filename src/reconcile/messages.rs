//! The messages pass: every tracked message still open, or sent and awaiting its carrier
//! receipt, looked up and applied in chunks.

use super::*;

impl Reconciler {
    pub(super) async fn messages_pass(
        &self,
        shutdown: &CancellationToken,
        summary: &mut PassSummary,
    ) -> anyhow::Result<()> {
        let stale = chrono::Duration::seconds(
            i64::try_from(self.settings.message_stale_after_secs).unwrap_or(i64::MAX / 2),
        );
        let now = Utc::now();
        let ids = self
            .pool
            .open_messages(
                &self.account,
                now - stale,
                now - crate::model::RECEIPT_WINDOW,
            )
            .await?;
        for chunk in ids.chunks(MESSAGE_CHUNK) {
            if shutdown.is_cancelled() {
                summary.interrupted = true;
                break;
            }
            // Owned ids and client clones keep the futures free of borrows (and `Send`).
            let client = self.client.clone();
            let fetched: Vec<(String, Result<models::MessageStatus, ClientError>)> =
                futures::stream::iter(chunk.to_vec())
                    .map(move |id| {
                        let client = client.clone();
                        async move {
                            let result = client.message(&id).await;
                            (id, result)
                        }
                    })
                    .buffer_unordered(MESSAGE_CONCURRENCY)
                    .collect()
                    .await;
            let fetched_at = Utc::now();
            let mut statuses = Vec::with_capacity(fetched.len());
            for (id, result) in fetched {
                summary.messages_checked += 1;
                match result {
                    Ok(message) => statuses.push(mirror_status(&message)),
                    Err(error) => summary.errors.push(format!("message {id}: {error}")),
                }
            }
            let observations: Vec<StatusObservation> = statuses
                .iter()
                .map(|message| StatusObservation {
                    message,
                    lead_id: None,
                    organization_id: None,
                    occurred_at: fetched_at,
                    source: Source::Reconcile,
                })
                .collect();
            let mut tx = self.pool.begin_write().await?;
            summary.messages_refreshed +=
                apply::statuses(&mut tx, &self.account, &observations, fetched_at).await?;
            tx.commit().await?;
        }
        Ok(())
    }
}
