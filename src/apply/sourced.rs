//! What a source's records become: a record is claimed once (a record read again records
//! nothing), and an opt-out it says is recorded in each target account as an account-wide
//! import is (every organization holding the number, and the number suppressed for the
//! leads that come later), or in the source's organizations. A number opted out already in
//! every organization of every target account holding it changes nothing: `confirmed`
//! (what was written to the system from here and read back ends there). So does a record
//! that is a destination's own write read back ([`ECHO_WINDOW`]): an opt-out written for one
//! organization is not made account-wide by its echo, nor an opt-in given since undone.
//!
//! Records are recorded a slice at a time, up to [`PER_TRANSACTION`] per write transaction,
//! which ends early when ingest waits for the write lock: a delivery waits for one slice at
//! most.

use std::collections::HashMap;

use chrono::Utc;

use super::imported::{self, Batch, ListedNumber, Scope};
use crate::model::read::{ReadRecord, Said, event_ref};
use crate::model::trust::Trust;
use crate::model::{AccountId, ConsentObservation, KeptEvidence, Source as Kind, Timestamp};
use crate::store::{ApplyTx, Connection, SourceCounts, SourceTx};

/// Records recorded at once within a transaction: on SQLite a transaction that ingest waits
/// for ends after the slice it is recording, so a delivery waits for one slice at most.
pub const SLICE: usize = 200;
/// Records per write transaction at most (when nothing waits for the write lock).
pub const PER_TRANSACTION: usize = 2_000;

/// A record saying what a destination of the same system (kind, API and key) last wrote of
/// its number, changed there no later than this after that write, is that write read back
/// (Action Network cannot leave the daemon's own changes out of its listing as VAN does):
/// `confirmed`, nothing recorded. The window covers the request's time and the two clocks'
/// difference; a person who says the same again there within it changes nothing there.
pub const ECHO_WINDOW: chrono::Duration = chrono::Duration::seconds(60);

/// Where and how a source's records are recorded.
#[derive(Debug, Clone)]
pub struct Recorder {
    pub name: String,
    pub kind: Kind,
    /// The accounts its opt-outs hold in.
    pub targets: Vec<AccountId>,
    pub scope: Scope,
    /// Its opt-ins are recorded too.
    pub opt_ins: bool,
    /// The destinations that write the system it reads: their writes read back are echoes.
    pub echoes: Vec<String>,
    /// What a time it reads ranks at ([`Trust::time`]).
    pub trust: Trust,
}

/// One record's part in a slice: its index, and the number and time of what it says.
struct Said1<'r> {
    record: &'r ReadRecord,
    phone_number: &'r str,
    opted_out: bool,
    occurred_at: chrono::DateTime<Utc>,
}

/// A slice's records as [`Recorder::sorted`] finds them.
#[derive(Default)]
struct Sorted<'r> {
    /// Each number once per slice, at its earliest record.
    by_number: HashMap<(&'r str, bool), Said1<'r>>,
    held: Vec<crate::model::review::HeldReply<'r>>,
    counts: SourceCounts,
}

impl Recorder {
    /// Where source `settings` of the accounts `served` records (its echoes: none until
    /// given).
    pub fn of(settings: &crate::settings::SourceSettings, served: &[AccountId]) -> Self {
        Self {
            name: settings.name.clone(),
            kind: settings.system.source(),
            targets: settings.targets(served),
            scope: if settings.scope.organizations.is_empty() {
                Scope::Account
            } else {
                Scope::Organizations(settings.scope.organizations.clone())
            },
            opt_ins: settings.opt_ins,
            echoes: Vec::new(),
            trust: Trust::default(),
        }
    }

    /// Records `records`, a slice per transaction on `conn`; what they came to.
    pub async fn record(
        &self,
        conn: &mut Connection,
        records: &[ReadRecord],
    ) -> Result<SourceCounts, crate::store::Error> {
        let mut counts = SourceCounts::default();
        let mut slices = records.chunks(SLICE).peekable();
        while slices.peek().is_some() {
            let mut tx = conn.begin_write().await?;
            let mut done = SourceCounts::default();
            let mut taken = 0;
            for slice in slices.by_ref() {
                done += self.record_slice(&mut tx, slice).await?;
                taken += slice.len();
                if taken >= PER_TRANSACTION || tx.wanted_by_ingest() {
                    break;
                }
            }
            tx.commit().await?;
            crate::signal::ledger_grew();
            counts += done;
        }
        Ok(counts)
    }

    /// One slice in `tx`: the records not claimed before, each counted once.
    pub(crate) async fn record_slice<T: ApplyTx + SourceTx + Send + ?Sized>(
        &self,
        tx: &mut T,
        slice: &[ReadRecord],
    ) -> Result<SourceCounts, crate::store::Error> {
        let now = Utc::now();
        let keys: Vec<&str> = slice.iter().map(|r| r.key.as_str()).collect();
        let claimed = tx.claim_records(&self.name, &keys, Timestamp(now)).await?;
        let Sorted {
            by_number,
            held,
            mut counts,
        } = self.sorted(slice, &claimed, now);
        if !held.is_empty() {
            tx.hold_replies(&self.name, &held).await?;
        }
        let mut said: Vec<Said1<'_>> = by_number.into_values().collect();
        let echoes = self.echoes_in(tx, &said).await?;
        said.retain(|s| !echoes.contains(&(s.phone_number, s.opted_out)));
        counts.confirmed += echoes.len() as i64;
        for opted_out in [true, false] {
            let these: Vec<&Said1<'_>> = said.iter().filter(|s| s.opted_out == opted_out).collect();
            if these.is_empty() {
                continue;
            }
            let recorded = self.record_numbers(tx, &these, opted_out, now).await?;
            if opted_out {
                counts.opt_outs += recorded as i64;
            } else {
                counts.opt_ins += recorded as i64;
            }
            counts.confirmed += (these.len() - recorded) as i64;
        }
        tx.count_records(&self.name, counts).await?;
        Ok(counts)
    }

    /// The records of `slice` claimed now (`claimed`), each once: what they say of each
    /// number (its earliest record, a later one counted `confirmed`), the replies held for
    /// review, and their counts so far.
    fn sorted<'r>(
        &self,
        slice: &'r [ReadRecord],
        claimed: &std::collections::HashSet<String>,
        now: chrono::DateTime<Utc>,
    ) -> Sorted<'r> {
        let mut sorted = Sorted::default();
        let counts = &mut sorted.counts;
        let mut taken = std::collections::HashSet::new();
        for record in slice {
            if !claimed.contains(&record.key) || !taken.insert(record.key.as_str()) {
                continue;
            }
            counts.read += 1;
            match &record.said {
                Said::Consent {
                    phone_number,
                    opted_out,
                    occurred_at,
                } if *opted_out || self.opt_ins => {
                    // A change time past its reading ranks at the reading: the record, kept
                    // as the entry's evidence, holds the time as given.
                    let ranked = self.trust.time(*occurred_at, now);
                    counts.future += i64::from(ranked.future.is_some());
                    let said = Said1 {
                        record,
                        phone_number,
                        opted_out: *opted_out,
                        occurred_at: ranked.at,
                    };
                    match sorted.by_number.entry((phone_number.as_str(), *opted_out)) {
                        std::collections::hash_map::Entry::Occupied(mut first) => {
                            counts.confirmed += 1;
                            if said.occurred_at < first.get().occurred_at {
                                first.insert(said);
                            }
                        }
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(said);
                        }
                    }
                }
                Said::Review {
                    phone_number,
                    text,
                    matched,
                    received_at,
                } => {
                    counts.review += 1;
                    sorted.held.push(crate::model::review::HeldReply {
                        record: &record.key,
                        phone_number,
                        body: text,
                        matched,
                        stands_on: &record.stands_on,
                        received_at: Timestamp(*received_at),
                    });
                }
                Said::Consent { .. } | Said::Nothing(_) => counts.ignored += 1,
            }
        }
        sorted
    }

    /// Those of `said` that a destination of [`Recorder::echoes`] wrote there, the record
    /// no later than [`ECHO_WINDOW`] after the write.
    async fn echoes_in<'s, T: SourceTx + Send + ?Sized>(
        &self,
        tx: &mut T,
        said: &[Said1<'s>],
    ) -> Result<std::collections::HashSet<(&'s str, bool)>, crate::store::Error> {
        if self.echoes.is_empty() || said.is_empty() {
            return Ok(Default::default());
        }
        let phones: Vec<&str> = said.iter().map(|s| s.phone_number).collect();
        let written = tx.last_writes(&self.echoes, &phones).await?;
        Ok(said
            .iter()
            .filter(|s| {
                written
                    .get(&(s.phone_number.to_owned(), s.opted_out))
                    .is_some_and(|at| s.occurred_at <= at.0 + ECHO_WINDOW)
            })
            .map(|s| (s.phone_number, s.opted_out))
            .collect())
    }

    /// Records what `said` says (distinct numbers, all opt-outs or all opt-ins) in every
    /// target account but where every organization holding a number (or each of the
    /// source's organizations) says so already; how many of them were recorded somewhere.
    async fn record_numbers<T: ApplyTx + ?Sized>(
        &self,
        tx: &mut T,
        said: &[&Said1<'_>],
        opted_out: bool,
        now: chrono::DateTime<Utc>,
    ) -> Result<usize, crate::store::Error> {
        let mut recorded = vec![false; said.len()];
        let numbers: Vec<ListedNumber> = said
            .iter()
            .enumerate()
            .map(|(i, s)| ListedNumber {
                phone_number: s.phone_number.to_owned(),
                line: i as u64,
            })
            .collect();
        for account in &self.targets {
            let entry = |number: &ListedNumber, organization: &str| {
                self.observation(said[number.line as usize], organization)
            };
            let batch = Batch {
                scope: &self.scope,
                numbers: &numbers,
                now,
                dry_run: false,
                opted_out,
            };
            let (_, held) = imported::record_unless_held(tx, account, batch, entry).await?;
            for number in numbers
                .iter()
                .filter(|n| !held.contains(n.phone_number.as_str()))
            {
                recorded[number.line as usize] = true;
            }
        }
        Ok(recorded.into_iter().filter(|r| *r).count())
    }

    /// The entry of what `said` says, in `organization`.
    fn observation(&self, said: &Said1<'_>, organization: &str) -> ConsentObservation {
        ConsentObservation {
            organization_id: organization.to_owned(),
            phone_number: said.phone_number.to_owned(),
            lead_id: None,
            opted_out: said.opted_out,
            occurred_at: said.occurred_at,
            source: self.kind,
            event_ref: event_ref(self.kind, &self.name, &said.record.key),
            tag_id: None,
            reason: None,
            evidence: Some(KeptEvidence::Read {
                actor: self.name.clone(),
                record: said.record.key.clone(),
                stands_on: said.record.stands_on.clone(),
            }),
        }
    }
}
