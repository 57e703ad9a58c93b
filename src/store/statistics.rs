//! PostgreSQL's planner kept up with a long run of writes on one connection (a source's
//! read-back). Where autovacuum is late or off, a table filled from empty has no
//! statistics, and a statement its connection keeps prepared stays planned as for the few
//! rows the table held then: a lookup by key becomes a scan of the whole table, each
//! statement slower than the last. So the writer has the tables counted anew (`ANALYZE`,
//! which plans kept prepared are made again after) each time they may have doubled.

use super::{Connection, Error};

/// What `ANALYZE` counts: the columns the recording path looks rows up by.
const ANALYZE: &str = "ANALYZE consent_state (phone_number, organization_id, account_id),
     ledger (event_ref, organization_id, phone_number, account_id)";

/// The rows the planner believes the smaller of those tables holds (none before their
/// first count).
const BELIEVED: &str = "SELECT GREATEST(MIN(reltuples), 0)::int8 FROM pg_class
     WHERE oid IN ('consent_state'::regclass, 'ledger'::regclass)";

/// What a writer added since the planner's last count, against what it believed then.
#[derive(Debug, Default)]
pub struct Growth {
    /// Rows written since the last count.
    written: u64,
    /// The rows the planner believed the tables held at the last count; `None` before
    /// it is asked.
    believed: Option<u64>,
    /// A count failed or counted nothing: not tried again in this run.
    given_up: bool,
}

impl Growth {
    /// Notes `rows` more written to those tables on `conn` (outside a transaction), each
    /// of them one row at least; once they outnumber what the planner believes the
    /// tables hold, has them counted anew. Nothing on SQLite, whose planner goes by its
    /// indexes. A failure is logged, not raised: it costs speed, not correctness.
    pub async fn wrote(&mut self, conn: &mut Connection, rows: u64) {
        let Connection::Postgres(conn) = conn else {
            return;
        };
        if self.given_up {
            return;
        }
        self.written += rows;
        if let Err(error) = self.count_when_grown(conn).await {
            tracing::warn!(%error, "cannot have the planner count the ledger anew");
            self.given_up = true;
        }
    }

    async fn count_when_grown(&mut self, conn: &mut sqlx::PgConnection) -> Result<(), Error> {
        let believed = match self.believed {
            Some(believed) => believed,
            None => believed_rows(conn).await?,
        };
        self.believed = Some(believed);
        if self.written <= believed {
            return Ok(());
        }
        sqlx::query(ANALYZE)
            .persistent(false)
            .execute(&mut *conn)
            .await?;
        let counted = believed_rows(conn).await?;
        // Rows were written, yet none counted (a role that does not own the tables is
        // only warned): no use asking again in this run.
        self.given_up = counted == 0;
        self.believed = Some(counted);
        self.written = 0;
        Ok(())
    }
}

async fn believed_rows(conn: &mut sqlx::PgConnection) -> Result<u64, Error> {
    let rows: i64 = sqlx::query_scalar(BELIEVED).fetch_one(&mut *conn).await?;
    Ok(u64::try_from(rows).unwrap_or(0))
}
