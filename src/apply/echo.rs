//! Echo recognition: the webhook the service sends back for a change pushed from here is
//! not a new change. It takes the local change's event time and names it in its reason (the
//! rule is written out in `migrations/sqlite/20261121000003_pushes.sql`), unless a change
//! of the pair the other way came between the push and it: then it is the person's act.

use crate::model::AccountId;
use chrono::{DateTime, TimeDelta, Utc};

use crate::model::{ConsentObservation, PushedChange};
use crate::store::ApplyTx;

/// The service writes event times in whole seconds: an echo may predate the attempt by that.
const ECHO_BEFORE: TimeDelta = TimeDelta::seconds(5);
/// How long after the last attempt a returning webhook still counts as its echo.
const ECHO_AFTER: TimeDelta = TimeDelta::minutes(10);

/// Recognises echoes within one batch.
#[derive(Debug, Default)]
pub struct EchoMatcher {
    candidates: Vec<PushedChange>,
}

/// The local change an echo belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    pub seq: i64,
    /// The local change's event time, which the echo takes.
    pub occurred_at: DateTime<Utc>,
}

impl EchoMatcher {
    /// Loads the candidates for the (organization, number) pairs of a batch.
    pub async fn load<T: ApplyTx + ?Sized>(
        tx: &mut T,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> Result<Self, crate::store::Error> {
        if keys.is_empty() {
            return Ok(Self::default());
        }
        Ok(Self {
            candidates: tx.pushed_changes(account, keys).await?,
        })
    }

    /// The local change `observation` echoes, if any; marks it echoed (in the caller's
    /// transaction) so no second webhook is taken for the same echo.
    pub async fn take<T: ApplyTx + ?Sized>(
        &mut self,
        tx: &mut T,
        observation: &ConsentObservation,
    ) -> Result<Option<Echo>, crate::store::Error> {
        let at = observation.occurred_at;
        let found = self.candidates.iter().position(|c| {
            c.organization_id == observation.organization_id
                && c.phone_number == observation.phone_number
                && c.opted_out == observation.opted_out
                && (c.first_attempt_at - ECHO_BEFORE..=c.last_attempt_at + ECHO_AFTER).contains(&at)
                && c.contradicted_at.is_none_or(|changed| at < changed)
        });
        let Some(index) = found else {
            self.note(observation);
            return Ok(None);
        };
        let candidate = self.candidates.remove(index);
        tx.mark_echo(candidate.seq, &observation.event_ref).await?;
        Ok(Some(Echo {
            seq: candidate.seq,
            occurred_at: candidate.occurred_at,
        }))
    }
}

impl EchoMatcher {
    /// Takes `observation`, which is no echo, into account for the batch's later ones: a
    /// change of its pair the other way since a push's first attempt means that a webhook
    /// of the push's direction later than it is the person's act again (a STOP after a
    /// START), not the echo, however soon after the push it comes.
    fn note(&mut self, observation: &ConsentObservation) {
        for c in &mut self.candidates {
            if c.organization_id == observation.organization_id
                && c.phone_number == observation.phone_number
                && c.opted_out != observation.opted_out
                && observation.occurred_at >= c.first_attempt_at
            {
                let at = observation.occurred_at;
                c.contradicted_at = Some(c.contradicted_at.map_or(at, |t| t.min(at)));
            }
        }
    }
}

/// The reason written on an echo's ledger entry.
pub fn echo_reason(seq: i64) -> String {
    format!("echo of local change seq {seq}")
}
