//! The other replicas' ledger commits, heard on PostgreSQL: the `NOTIFY`s of the ledger's
//! trigger ([`crate::signal::PG_CHANNEL`]) turned into [`crate::signal::ledger_grew`] here.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::signal::{PG_CHANNEL, ledger_grew};

/// Pause before listening again after the listening connection failed.
const RELISTEN_PAUSE: Duration = Duration::from_secs(1);

/// Turns the `NOTIFY`s of every replica's appenders into wake-ups here, until `shutdown`.
/// A lost connection is logged and listened to again; meanwhile followers poll.
pub(super) async fn listen(pool: sqlx::PgPool, shutdown: CancellationToken) {
    loop {
        let listened = tokio::select! {
            _ = shutdown.cancelled() => return,
            result = listen_once(&pool) => result,
        };
        if let Err(error) = listened {
            tracing::warn!(%error, "not listening to the ledger's notifications; followers poll meanwhile");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RELISTEN_PAUSE) => {}
        }
    }
}

async fn listen_once(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(PG_CHANNEL).await?;
    // What was committed before this connection listened is read now.
    ledger_grew();
    loop {
        // `None`: the connection was lost and is listening again; what was notified in
        // between is lost, so the followers read the ledger anyway.
        listener.try_recv().await?;
        ledger_grew();
    }
}
