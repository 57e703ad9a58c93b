//! Read statements with one text for both backends (`$N` parameters, `CAST(... AS TEXT)`
//! where PostgreSQL needs a parameter's type): a number's history, its entries for the
//! evidence bundle, the change feed, the kept rejected deliveries, and the ledger's columns every listing of entries
//! selects.

/// Selected `FROM ledger`; `push` and `echo_of` come from the push queue. A macro, so that
/// the statements built with it are literals (an export's stream borrows its statement).
macro_rules! ledger_columns {
    () => {
        "seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at,
         source, event_ref, superseded,
         (SELECT p.state FROM pushes AS p WHERE p.seq = ledger.seq) AS push,
         (SELECT p.seq FROM pushes AS p WHERE p.echo_ref = ledger.event_ref
            AND p.organization_id = ledger.organization_id AND p.phone_number = ledger.phone_number
          ORDER BY p.seq LIMIT 1) AS echo_of"
    };
}

pub(crate) use ledger_columns;

/// The shared methods of `ReadStore`, expanded inside each backend's `impl` block.
macro_rules! shared {
    () => {
        async fn suppression(
            &self,
            phone: &str,
        ) -> Result<Option<crate::model::Suppression>, crate::store::Error> {
            let row: Option<(i64, crate::model::Timestamp)> =
                sqlx::query_as("SELECT seq, since FROM suppressions WHERE phone_number = $1")
                    .bind(phone)
                    .fetch_optional(self)
                    .await?;
            Ok(row.map(|(seq, since)| crate::model::Suppression { seq, since }))
        }

        async fn history(
            &self,
            phone: &str,
            organization: Option<&str>,
        ) -> Result<Vec<crate::model::LedgerEntry>, crate::store::Error> {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::read::ledger_columns!(),
                " FROM ledger
                 WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR organization_id = $2)
                 ORDER BY seq"
            ))
            .bind(phone)
            .bind(organization)
            .fetch_all(self)
            .await?)
        }

        async fn changes(
            &self,
            after: i64,
            limit: i64,
        ) -> Result<Vec<crate::model::LedgerEntry>, crate::store::Error> {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::read::ledger_columns!(),
                " FROM ledger WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(limit)
            .fetch_all(self)
            .await?)
        }

        async fn backlog(&self) -> Result<crate::model::Backlog, crate::store::Error> {
            Ok(sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM outbox WHERE state = 'pending') AS pending,
                        (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
                            AS oldest_pending_at,
                        (SELECT COUNT(*) FROM outbox WHERE state = 'quarantined') AS quarantined,
                        (SELECT COUNT(*) FROM pushes WHERE state = 'pending') AS pushes_pending",
            )
            .fetch_one(self)
            .await?)
        }

        async fn rejected(&self) -> Result<Vec<crate::model::KeptRejection>, crate::store::Error> {
            Ok(sqlx::query_as(
                "SELECT id, received_at, reason, headers, body FROM rejected_deliveries
                 ORDER BY id DESC",
            )
            .fetch_all(self)
            .await?)
        }
    };
}

pub(crate) use shared;

/// `EvidenceStore::evidence_entries`, expanded inside each backend's `impl` block.
macro_rules! evidence_entries {
    () => {
        async fn evidence_entries(
            &self,
            phone: &str,
            organization: Option<&str>,
        ) -> Result<Vec<crate::model::StoredEntry>, crate::store::Error> {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::read::ledger_columns!(),
                ", tag_id, reason, hash, CAST(evidence AS TEXT) AS evidence,
                    (SELECT b.hash FROM ledger AS b WHERE b.seq < ledger.seq
                     ORDER BY b.seq DESC LIMIT 1) AS prev_hash
                 FROM ledger
                 WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR organization_id = $2)
                 ORDER BY seq"
            ))
            .bind(phone)
            .bind(organization)
            .fetch_all(self)
            .await?)
        }
    };
}

pub(crate) use evidence_entries;
