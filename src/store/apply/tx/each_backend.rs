//! [`ApplyTx`] for whatever lends a backend's connection: each write run by `on_backend!`,
//! its statement written here when both backends share its text, else the backend's `apply`
//! or `mirror` of the same name; an empty batch returns before any statement.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::super::{NewEntry, NewMessage, PageCheckpoint, StateWrite, Suppressing};
use super::ApplyTx;
use crate::model::{
    AccountId, ConsentObservation, ConsentStates, Holders, Lead, PushedChange, StatusObservation,
    Suppression,
};
use crate::store::backend::{Lend, on_backend};
use crate::store::exec::{Exec as _, args};

/// The writes on a write transaction ([`Tx`]), or on a backend's connection in a
/// transaction of its own.
impl<T: Lend + Send + ?Sized> ApplyTx for T {
    async fn lock_numbers(&mut self, phones: &[&str]) -> Result<(), crate::store::Error> {
        if phones.is_empty() {
            return Ok(());
        }
        on_backend!(self, |conn, dialect| {
            dialect::apply::lock_numbers(conn, phones).await
        })
    }

    async fn locate_leads(
        &mut self,
        account: &AccountId,
        lead_ids: &[&str],
    ) -> Result<HashMap<String, (String, String)>, crate::store::Error> {
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::locate_leads(conn, account, lead_ids).await
        })?;
        Ok(rows.into_iter().map(|(id, o, p)| (id, (o, p))).collect())
    }

    async fn holders_of(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> Result<Holders, crate::store::Error> {
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::holders_of(conn, account, phones).await
        })?;
        Ok(crate::model::holders(rows))
    }

    async fn pushed_changes(
        &mut self,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> Result<Vec<PushedChange>, crate::store::Error> {
        on_backend!(self, |conn, dialect| {
            dialect::apply::pushed_changes(conn, account, keys).await
        })
    }

    async fn unsent_opt_outs_of(
        &mut self,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> Result<HashSet<(String, String)>, crate::store::Error> {
        if keys.is_empty() {
            return Ok(HashSet::new());
        }
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::unsent_opt_outs_of(conn, account, keys).await
        })?;
        Ok(rows.into_iter().collect())
    }

    async fn answered_push(
        &mut self,
        account: &AccountId,
        event_ref: &str,
    ) -> Result<Option<i64>, crate::store::Error> {
        on_backend!(self, |conn| {
            conn.int(
                "SELECT p.seq FROM ledger AS l JOIN pushes AS p ON p.seq = l.seq
                     WHERE l.event_ref = $1 AND l.account_id = $2 AND p.state = 'sent'
                     LIMIT 1",
                &args![event_ref, account],
            )
            .await
        })
    }

    async fn opt_out_answered_since(
        &mut self,
        account: &AccountId,
        (organization, phone, lead_id): (&str, &str, &str),
        since: crate::model::Timestamp,
    ) -> Result<Option<i64>, crate::store::Error> {
        on_backend!(self, |conn| {
            conn.int(
                "SELECT seq FROM pushes
                     WHERE organization_id = $1 AND phone_number = $2 AND account_id = $3
                       AND lead_id = $4 AND opted_out AND state = 'sent' AND created_at >= $5
                     ORDER BY seq DESC LIMIT 1",
                &args![organization, phone, account, lead_id, since],
            )
            .await
        })
    }

    async fn mark_echo(
        &mut self,
        push_seq: i64,
        event_ref: &str,
    ) -> Result<(), crate::store::Error> {
        on_backend!(self, |conn| {
            conn.run(
                "UPDATE pushes SET echo_ref = $2 WHERE seq = $1",
                &args![push_seq, event_ref],
            )
            .await
            .map(drop)
        })
    }

    async fn consent_states(
        &mut self,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> Result<ConsentStates, crate::store::Error> {
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::consent_states(conn, account, keys).await
        })?;
        Ok(super::super::consent_states(rows))
    }

    async fn states_of_numbers(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> Result<ConsentStates, crate::store::Error> {
        if phones.is_empty() {
            return Ok(ConsentStates::default());
        }
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::states_of_numbers(conn, account, phones).await
        })?;
        Ok(super::super::consent_states(rows))
    }

    async fn append_ledger(
        &mut self,
        account: &AccountId,
        entries: &[NewEntry<'_>],
        recorded_at: DateTime<Utc>,
    ) -> Result<Vec<Option<i64>>, crate::store::Error> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        on_backend!(self, |conn, dialect| {
            dialect::apply::append_ledger(conn, account, entries, recorded_at).await
        })
    }

    async fn write_states(
        &mut self,
        account: &AccountId,
        states: &[StateWrite<'_>],
    ) -> Result<(), crate::store::Error> {
        if states.is_empty() {
            return Ok(());
        }
        on_backend!(self, |conn, dialect| {
            dialect::apply::write_states(conn, account, states).await
        })
    }

    async fn upsert_leads(
        &mut self,
        account: &AccountId,
        leads: &[(&Lead, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> Result<u64, crate::store::Error> {
        if leads.is_empty() {
            return Ok(0);
        }
        on_backend!(self, |conn, dialect| {
            dialect::mirror::upsert_leads(conn, account, leads, now).await
        })
    }

    async fn apply_statuses(
        &mut self,
        account: &AccountId,
        observations: &[StatusObservation<'_>],
        now: DateTime<Utc>,
    ) -> Result<u64, crate::store::Error> {
        if observations.is_empty() {
            return Ok(0);
        }
        on_backend!(self, |conn, dialect| {
            dialect::mirror::apply_statuses(conn, account, observations, now).await
        })
    }

    async fn settle_outbox(
        &mut self,
        applied: &[i64],
        quarantined: &[(i64, String)],
        now: DateTime<Utc>,
    ) -> Result<(), crate::store::Error> {
        on_backend!(self, |conn, dialect| {
            dialect::apply::settle_outbox(conn, applied, quarantined, now).await
        })
    }

    async fn sent_after_opt_out(
        &mut self,
        account: &AccountId,
        messages: &[NewMessage<'_>],
    ) -> Result<u64, crate::store::Error> {
        if messages.is_empty() {
            return Ok(0);
        }
        let count = on_backend!(self, |conn, dialect| {
            dialect::apply::sent_after_opt_out(conn, account, messages).await
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn suppressions(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> Result<HashMap<String, Suppression>, crate::store::Error> {
        if phones.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = on_backend!(self, |conn, dialect| {
            dialect::apply::suppressions(conn, account, phones).await
        })?;
        Ok(rows
            .into_iter()
            .map(|(phone, seq, since)| (phone, Suppression { seq, since }))
            .collect())
    }

    async fn suppress(
        &mut self,
        account: &AccountId,
        opt_outs: &[Suppressing<'_>],
    ) -> Result<(), crate::store::Error> {
        if opt_outs.is_empty() {
            return Ok(());
        }
        on_backend!(self, |conn, dialect| {
            dialect::apply::suppress(conn, account, opt_outs).await
        })
    }

    async fn lift_suppressions(
        &mut self,
        account: &AccountId,
        opt_ins: &[(&str, DateTime<Utc>)],
    ) -> Result<(), crate::store::Error> {
        if opt_ins.is_empty() {
            return Ok(());
        }
        on_backend!(self, |conn, dialect| {
            dialect::apply::lift_suppressions(conn, account, opt_ins).await
        })
    }

    async fn queue_push(
        &mut self,
        account: &AccountId,
        seq: i64,
        change: &ConsentObservation,
        now: DateTime<Utc>,
    ) -> Result<(), crate::store::Error> {
        on_backend!(self, |conn| {
            let now = crate::model::Timestamp(now);
            conn.run(
                "UPDATE pushes SET state = 'superseded', finished_at = $3
                     WHERE organization_id = $1 AND phone_number = $2 AND state = 'pending' AND
                         attempts = 0
                       AND account_id = $4",
                &args![&change.organization_id, &change.phone_number, now, account],
            )
            .await?;
            conn.run(
                "INSERT INTO pushes (seq, organization_id, phone_number, opted_out, tag_id,
                         lead_id,
                                         next_attempt_at, created_at, account_id)
                     VALUES ($1, $2, $3, $4, $5,
                             (SELECT lead_id FROM consent_state
                              WHERE organization_id = $2 AND phone_number = $3 AND account_id = $7),
                             $6, $6, $7)",
                &args![
                    seq,
                    &change.organization_id,
                    &change.phone_number,
                    change.opted_out,
                    &change.tag_id,
                    now,
                    account,
                ],
            )
            .await
            .map(drop)
        })
    }

    async fn claim_pending(
        &mut self,
        limit: i64,
        now: DateTime<Utc>,
    ) -> Result<Vec<crate::model::StoredDelivery>, crate::store::Error> {
        on_backend!(self, |conn, dialect| {
            dialect::outbox::claim_pending(conn, limit, now).await
        })
    }

    async fn page_written(&mut self, page: PageCheckpoint<'_>) -> Result<(), crate::store::Error> {
        super::super::super::reconcile::page_written(self, page).await
    }
}
