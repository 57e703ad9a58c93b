//! Leases in the database: work that must run in one place at a time, whichever process
//! (the daemon, or `reconcile` run by hand) asks for it.
//!
//! A lease is a row naming its holder and when it lapses, on the database's clock so that
//! processes with different clocks agree. The holder renews it while the work goes on; a
//! holder that dies stops renewing and its lease lapses after [`LEASE_TTL`]. A holder that
//! finds its lease taken (it was stalled past the TTL and someone else took over) is told
//! through a cancellation token, so it stops at its next safe point.

use crate::store::LeaseStore;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// How long a lease lasts without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

use crate::store::Pool;

/// A lease someone else holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is held by {holder} (for {expires_in_secs} s more unless renewed)")]
pub struct Held {
    pub name: String,
    pub holder: String,
    pub expires_in_secs: i64,
}

/// Why leases could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error(transparent)]
    Held(#[from] Held),
    #[error("cannot read or write leases: {0}")]
    Database(#[from] crate::store::Error),
}

/// Leases held together, renewed in the background until dropped or released.
pub struct Leases {
    pool: Pool,
    names: Vec<String>,
    holder: String,
    lost: CancellationToken,
    _renewal: AbortOnDropHandle<()>,
}

/// How long leases last without renewal, and how often they are renewed (a third of it).
#[derive(Debug, Clone, Copy)]
struct Term {
    ttl: Duration,
}

impl Term {
    fn ttl_ms(self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    fn renew_every(self) -> Duration {
        self.ttl / 3
    }
}

impl Leases {
    /// Takes every lease of `names` for `holder` for [`LEASE_TTL`], or none of them: if one
    /// is held by another holder and has not lapsed, nothing is taken and that holder is
    /// named.
    pub async fn acquire(
        pool: impl Into<Pool>,
        names: Vec<String>,
        holder: &str,
    ) -> Result<Self, LeaseError> {
        Self::acquire_for(pool, names, holder, LEASE_TTL).await
    }

    /// [`Leases::acquire`] with a lifetime of `ttl` (renewed every third of it).
    pub async fn acquire_for(
        pool: impl Into<Pool>,
        names: Vec<String>,
        holder: &str,
        ttl: Duration,
    ) -> Result<Self, LeaseError> {
        let pool = pool.into();
        let term = Term { ttl };
        let ttl_ms = term.ttl_ms();
        let held = pool.take_leases(&names, holder, ttl_ms).await?;
        if let Some(held) = held {
            return Err(Held {
                name: held.name,
                holder: held.holder,
                expires_in_secs: (held.expires_in_ms.max(0) + 999) / 1000,
            }
            .into());
        }
        let lost = CancellationToken::new();
        let renewal = tokio::spawn(renew(
            pool.clone(),
            names.clone(),
            holder.to_owned(),
            term,
            lost.clone(),
        ));
        Ok(Self {
            pool,
            names,
            holder: holder.to_owned(),
            lost,
            _renewal: AbortOnDropHandle::new(renewal),
        })
    }

    /// Cancelled when a renewal finds a lease taken by another holder: the work it guards
    /// must stop.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Gives the leases back at once (dropping them lets them lapse instead).
    pub async fn release(self) -> Result<(), crate::store::Error> {
        self.pool.release_leases(&self.names, &self.holder).await
    }
}

/// Extends the leases every third of their term while they are ours; cancels `lost` when
/// one is not any more. A renewal that fails on the database is tried again at the next
/// tick: the lease outlives two failed renewals.
async fn renew(
    pool: Pool,
    names: Vec<String>,
    holder: String,
    term: Term,
    lost: CancellationToken,
) {
    let mut ticker = tokio::time::interval(term.renew_every());
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        match renew_once(&pool, &names, &holder, term).await {
            Ok(Renewal::Renewed) => {}
            Ok(Renewal::TakenOver(name)) => {
                tracing::error!(lease = %name, %holder, "lease taken by another holder; stopping the work it guards");
                lost.cancel();
                return;
            }
            Err(error) => {
                tracing::warn!(%error, %holder, "cannot renew a lease; trying again");
            }
        }
    }
}

/// What one renewal found.
#[derive(Debug, PartialEq, Eq)]
enum Renewal {
    Renewed,
    /// This lease has another holder now.
    TakenOver(String),
}

async fn renew_once(
    pool: &Pool,
    names: &[String],
    holder: &str,
    term: Term,
) -> Result<Renewal, crate::store::Error> {
    let ttl_ms = term.ttl_ms();
    let taken_over = pool.renew_leases(names, holder, ttl_ms).await?;
    Ok(taken_over.map_or(Renewal::Renewed, Renewal::TakenOver))
}

/// A name for this process as a lease holder: host and process id, so an operator can tell
/// who holds what.
pub fn process_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::SqlitePool;

    async fn database() -> (tempfile::TempDir, SqlitePool) {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = crate::settings::Settings::default();
        settings.database.url = format!("sqlite://{}", dir.path().join("l.db").display());
        let pool = crate::store::pool(&settings).await.unwrap();
        crate::store::migrate(&pool).await.unwrap();
        (dir, pool)
    }

    async fn expires_ms(pool: &SqlitePool, name: &str) -> i64 {
        sqlx::query_scalar("SELECT expires_ms FROM leases WHERE name = ?")
            .bind(name)
            .fetch_one(pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_held_lease_is_refused_to_others_all_or_nothing() {
        let (_dir, pool) = database().await;
        let mine = Leases::acquire(&pool, vec!["b".into()], "me")
            .await
            .unwrap();
        let refused = Leases::acquire(&pool, vec!["a".into(), "b".into()], "you").await;
        let Err(LeaseError::Held(held)) = refused else {
            panic!("b is mine");
        };
        assert_eq!((held.name.as_str(), held.holder.as_str()), ("b", "me"));
        assert!(held.expires_in_secs > 0 && held.expires_in_secs <= 60);
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM leases ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert_eq!(names, ["b"], "nothing of a refused set is taken");
        mine.release().await.unwrap();
        assert!(
            Leases::acquire(&pool, vec!["a".into(), "b".into()], "you")
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_renewal_extends_a_lease_and_notices_a_takeover() {
        let (_dir, pool) = database().await;
        let names = vec!["r".to_owned()];
        let _mine = Leases::acquire(&pool, names.clone(), "me").await.unwrap();
        sqlx::query("UPDATE leases SET expires_ms = expires_ms - 50000")
            .execute(&pool)
            .await
            .unwrap();
        let before = expires_ms(&pool, "r").await;
        assert_eq!(
            renew_once(&Pool::from(&pool), &names, "me", Term { ttl: LEASE_TTL })
                .await
                .unwrap(),
            Renewal::Renewed
        );
        assert!(expires_ms(&pool, "r").await >= before + 49_000);
        // Stalled past its lapse, the lease went to another holder.
        sqlx::query("UPDATE leases SET holder = 'you'")
            .execute(&pool)
            .await
            .unwrap();
        assert_eq!(
            renew_once(&Pool::from(&pool), &names, "me", Term { ttl: LEASE_TTL })
                .await
                .unwrap(),
            Renewal::TakenOver("r".into())
        );
    }
}
