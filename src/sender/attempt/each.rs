//! A system of record's batch, an entry at a time: each entry's steps in order, each
//! answered step kept before the next is sent and before the cursor moves past the entry,
//! so that no answered action is sent again after a restart or a change of leader (an
//! action whose answer was lost in a crash is sent again: at least once). An unmatched or
//! refused entry is kept with its reason and passed; it never holds the rest back.
//!
//! A destination is told each person's opt-out once: an entry that says what it was last
//! told of that person (`destination_told`), with no entry of the other state of the
//! number since in its accounts and organizations, sends nothing and ends `already`,
//! honoured when that one was. An account-wide entry (no lead) at a system that finds
//! people by their lead ends `through_leads`: its leads' entries carry it. A request sent
//! and never answered is an unknown answer: it is sent once more at most (counted
//! `repeated`), and when that one is not answered either the entry ends `unconfirmed`.

use std::collections::HashMap;

use super::*;
use crate::metrics::DestinationOutcome;
use crate::model::{ACCOUNT_WIDE, Ending, EntryProgress, OutcomeKind, Source};
use crate::systems::{Answer, ApiRecord, Plan, Record, Step, Stop};

/// Why an account-wide entry sends nothing to a system that finds people by their lead.
const THROUGH_LEADS: &str = "account-wide: reached through the entries of its leads";
/// Why an organization's own opt-out with no lead sends nothing there.
const NO_LEAD_YET: &str = "no lead holds the number in its organization: reached through the entries of leads that appear with it";

/// What looking up a destination's needs came to.
pub(super) enum Prepared {
    Ready,
    /// A warehouse's table was behind what was sent to it: it is filled again from the
    /// first entry, under a new generation of the cursor.
    Refilled,
    /// It cannot be written now.
    Failed(Posted),
}

impl Sender {
    /// Looks up what `record` needs if it is not yet (a warehouse's table: filled again
    /// when it holds less than was sent to it).
    pub(super) async fn prepared(&self, record: &Record) -> Result<Prepared, crate::store::Error> {
        if record.ready() {
            return Ok(Prepared::Ready);
        }
        Ok(match record.prepare(&self.http).await {
            Ok(None) => Prepared::Ready,
            Ok(Some(table)) => self.refilled_if_behind(table).await?,
            Err(Stop::Retry { error, retry_after }) => {
                Prepared::Failed(Posted::failed(error, retry_after))
            }
            Err(stop) => Prepared::Failed(Posted::Stopped(stop.to_string())),
        })
    }

    /// Writes `items` into `record`, then records how the batch ended as a post's.
    pub(super) async fn write_each(
        &self,
        record: &ApiRecord,
        items: &[LedgerEntry],
        (progress, state): (&mut Progress, &crate::model::SubscriberState),
        scanned: i64,
        at_once: bool,
    ) -> Result<Attempt, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let Some((first, last)) = seq_span(items) else {
            return Ok(Attempt::Idle);
        };
        let kept: HashMap<i64, EntryProgress> = self
            .pool
            .entry_progress(name, first, last)
            .await?
            .into_iter()
            .map(|p| (p.seq, p))
            .collect();
        for entry in items {
            let kept = kept.get(&entry.seq);
            if kept.is_none_or(|k| k.outcome.is_none())
                && let Some(failed) = self.write_one(record, entry, kept).await?
            {
                let finished = Utc::now();
                let span = (first, progress.cursor, progress.cursor);
                return self
                    .record(progress, state, failed, span, finished, at_once)
                    .await;
            }
            progress.advance(entry.seq, None);
        }
        let finished = Utc::now();
        self.record(
            progress,
            state,
            Posted::Accepted,
            (first, last, scanned),
            finished,
            at_once,
        )
        .await
    }

    /// Writes one entry whose progress was `kept`: `None` once it has its outcome, else
    /// why the destination cannot go on now.
    async fn write_one(
        &self,
        record: &ApiRecord,
        entry: &LedgerEntry,
        kept: Option<&EntryProgress>,
    ) -> Result<Option<Posted>, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let (done, unknown) = kept.map_or((0, 0), |k| (k.actions_done, k.actions_unknown));
        let lead = match self.lead_of(record, entry).await? {
            Ok(lead) => lead,
            Err(reason) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::ThroughLeads);
                let ending = ending(OutcomeKind::ThroughLeads, Some(reason), None, None);
                self.outcomes
                    .record_ending(name, entry.seq, done, ending, Timestamp(Utc::now()))
                    .await?;
                return Ok(None);
            }
        };
        let plan = match record.plan(entry, lead.as_ref()) {
            Ok(plan) => plan,
            Err(reason) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::Unmatched);
                tracing::info!(destination = name, seq = entry.seq, %reason, "entry unmatched");
                let ending = ending(OutcomeKind::Unmatched, Some(&reason), None, None);
                self.outcomes
                    .record_ending(name, entry.seq, done, ending, Timestamp(Utc::now()))
                    .await?;
                return Ok(None);
            }
        };
        if done == 0 && unknown == 0 {
            if self.told_already(entry, &plan).await? {
                return Ok(None);
            }
            if let Some(stopped) = self.held_already(record, entry, &plan).await? {
                return Ok(stopped);
            }
        }
        self.send_steps(record, entry, &plan, (done, unknown)).await
    }

    /// Asks the system whether it holds what `entry` says already, when it is asked
    /// ([`ApiRecord::holds`]): then the entry ends `already`, nothing written, and the
    /// person counts as told. `Some` when the entry is done with (`Some(None)`) or the
    /// destination cannot go on now; `None` when its steps are to be sent.
    async fn held_already(
        &self,
        record: &ApiRecord,
        entry: &LedgerEntry,
        plan: &Plan,
    ) -> Result<Option<Option<Posted>>, crate::store::Error> {
        let Some(asked) = record.holds(&self.http, plan) else {
            return Ok(None);
        };
        self.pace().await;
        let why = match asked.await {
            Ok(None) => return Ok(None),
            Ok(Some(why)) => why,
            Err(Stop::Retry { error, retry_after }) => {
                return Ok(Some(Some(Posted::failed(error, retry_after))));
            }
            Err(stop) => return Ok(Some(Some(Posted::Stopped(stop.to_string())))),
        };
        let name = self.subscriber.name.as_str();
        self.metrics
            .destination_request(name, DestinationOutcome::Already);
        tracing::debug!(destination = name, seq = entry.seq, %why, "held already");
        let ending = ending(
            OutcomeKind::Already,
            Some(&why),
            None,
            Some((&plan.person, entry.opted_out, true)),
        );
        self.outcomes
            .record_ending(name, entry.seq, 0, ending, Timestamp(Utc::now()))
            .await?;
        Ok(Some(None))
    }

    /// The mirror's lead of `entry` when `record` needs one: its own, or for an entry of an
    /// organization with no lead (an import, a shared copy), the organization's lead of the
    /// number. `Err` when it reaches the system through other entries (account-wide; or
    /// made here for an organization with no lead of the number yet, which a lead that
    /// appears with it later gets an entry of its own for).
    async fn lead_of(
        &self,
        record: &ApiRecord,
        entry: &LedgerEntry,
    ) -> Result<Result<Option<serde_json::Value>, &'static str>, crate::store::Error> {
        if !record.needs_lead() {
            return Ok(Ok(None));
        }
        if let Some(id) = &entry.lead_id {
            return Ok(Ok(self.pool.lead(id, &entry.account_id).await?));
        }
        if entry.organization_id == ACCOUNT_WIDE {
            return Ok(Err(THROUGH_LEADS));
        }
        let leads = self
            .pool
            .leads(
                &entry.phone_number,
                Some(&entry.organization_id),
                Some(&entry.account_id),
            )
            .await?;
        let made_here = matches!(entry.source, Source::Local | Source::Import);
        Ok(match leads.into_iter().next() {
            Some(lead) => Ok(Some(lead)),
            None if made_here && entry.opted_out => Err(NO_LEAD_YET),
            None => Ok(None),
        })
    }

    /// Whether the destination was told what `entry` says of its person already, with no
    /// change of the number to the other state since in what it takes: then the entry ends
    /// `already` (or `unconfirmed`, after one never answered), honoured when that one was.
    async fn told_already(
        &self,
        entry: &LedgerEntry,
        plan: &Plan,
    ) -> Result<bool, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let Some(told) = self.pool.told(name, &plan.person).await? else {
            return Ok(false);
        };
        if told.opted_out != entry.opted_out || told.seq >= entry.seq {
            return Ok(false);
        }
        let between = (told.seq, entry.seq);
        let changed = self
            .pool
            .changes_of_number_between(&entry.phone_number, !entry.opted_out, between)
            .await?;
        if changed
            .iter()
            .any(|(account, org)| self.subscriber.takes_place(account, org))
        {
            return Ok(false);
        }
        let (outcome, reason) = if told.confirmed {
            let reason = format!("told by entry {}", told.seq);
            (OutcomeKind::Already, reason)
        } else {
            let reason = format!(
                "entry {} was sent twice and never answered: not sent again",
                told.seq
            );
            (OutcomeKind::Unconfirmed, reason)
        };
        self.metrics
            .destination_request(name, DestinationOutcome::Already);
        tracing::debug!(
            destination = name,
            seq = entry.seq,
            follows = told.seq,
            "told already"
        );
        let ending = ending(outcome, Some(&reason), Some(told.seq), None);
        self.outcomes
            .record_ending(name, entry.seq, 0, ending, told.at)
            .await?;
        Ok(true)
    }

    /// Sends the steps of `plan` not `done` yet; a step in `unknown` (sent before and never
    /// answered) is sent once more at most.
    async fn send_steps(
        &self,
        record: &ApiRecord,
        entry: &LedgerEntry,
        plan: &Plan,
        (mut done, unknown): (i64, i64),
    ) -> Result<Option<Posted>, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let pending: Vec<&Step> = plan.steps.iter().filter(|s| done & s.bit == 0).collect();
        let mut refused = None;
        let mut unanswered = Vec::new();
        for (i, step) in pending.iter().enumerate() {
            self.pace().await;
            let repeat = unknown & step.bit != 0;
            let answer = record.send(&self.http, step).await;
            let counted = if repeat {
                DestinationOutcome::Repeated
            } else {
                metric(&answer)
            };
            self.metrics.destination_request(name, counted);
            match answer {
                Answer::Success => {
                    done |= step.bit;
                    if i + 1 < pending.len() {
                        self.outcomes
                            .record_progress(name, entry.seq, (done, 0), Timestamp(Utc::now()))
                            .await?;
                    }
                }
                Answer::Refused(error) => {
                    tracing::warn!(destination = name, seq = entry.seq, action = step.action, %error, "entry refused");
                    refused = Some(error);
                    break;
                }
                Answer::Credentials(error) => {
                    return Ok(Some(Posted::Stopped(format!("credentials: {error}"))));
                }
                Answer::Retry { unknown: true, .. } if repeat => {
                    tracing::warn!(
                        destination = name,
                        seq = entry.seq,
                        action = step.action,
                        "sent twice and never answered; not sent again"
                    );
                    unanswered.push(step.action);
                }
                Answer::Retry {
                    error,
                    retry_after,
                    unknown: sent,
                } => {
                    if sent {
                        // Kept before the backoff: the next attempt sends it once more at most.
                        self.outcomes
                            .record_progress(
                                name,
                                entry.seq,
                                (done, step.bit),
                                Timestamp(Utc::now()),
                            )
                            .await?;
                    }
                    let error = format!("{}: {error}", step.action);
                    return Ok(Some(Posted::failed(error, retry_after)));
                }
            }
        }
        self.finish(entry, plan, done, refused, &unanswered).await?;
        Ok(None)
    }

    /// Records how the entry ended once its steps are done: refused, unconfirmed (a step
    /// sent twice and never answered), or sent; what the person was told is kept with it.
    async fn finish(
        &self,
        entry: &LedgerEntry,
        plan: &Plan,
        done: i64,
        refused: Option<String>,
        unanswered: &[&str],
    ) -> Result<(), crate::store::Error> {
        let person = plan.person.as_str();
        let unconfirmed = (!unanswered.is_empty()).then(|| {
            format!(
                "{}: sent twice, never answered; not sent again",
                unanswered.join(" and ")
            )
        });
        let ending = match (&refused, &unconfirmed) {
            (Some(error), _) => ending(OutcomeKind::Refused, Some(error), None, None),
            (None, Some(reason)) => Ending {
                told: Some((person, entry.opted_out, false)),
                ..ending(OutcomeKind::Unconfirmed, Some(reason), None, None)
            },
            (None, None) => Ending {
                told: Some((person, entry.opted_out, true)),
                ..ending(OutcomeKind::Sent, None, None, None)
            },
        };
        let name = self.subscriber.name.as_str();
        self.outcomes
            .record_ending(name, entry.seq, done, ending, Timestamp(Utc::now()))
            .await?;
        Ok(())
    }
}

fn ending<'a>(
    outcome: OutcomeKind,
    reason: Option<&'a str>,
    follows: Option<i64>,
    told: Option<(&'a str, bool, bool)>,
) -> Ending<'a> {
    Ending {
        outcome,
        reason,
        follows,
        told,
    }
}

fn metric(answer: &Answer) -> DestinationOutcome {
    match answer {
        Answer::Success => DestinationOutcome::Sent,
        Answer::Refused(_) => DestinationOutcome::Refused,
        Answer::Credentials(_) => DestinationOutcome::Credentials,
        Answer::Retry { .. } => DestinationOutcome::Failed,
    }
}
