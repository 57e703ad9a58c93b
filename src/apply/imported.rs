//! Opt-out lists recorded, a batch of a list's numbers at a time, in the caller's
//! transaction. Each (organization, number) not opted out already gets an `import` entry
//! whose evidence names the list; the opt-out of each mirrored lead is queued for the
//! service. An account-wide import also records each number once for the whole account
//! (organization [`ACCOUNT_WIDE`]), and that entry suppresses it (see `suppression`).

use crate::model::AccountId;
use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::model::{
    ACCOUNT_WIDE, ConsentObservation, ConsentStates, KeptEvidence, Source, StoredConsent,
};
use crate::store::{ApplyTx, Suppressing};

/// Whom a list opts out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Each of these organizations.
    Organizations(Vec<String>),
    /// The whole account: every organization holding the number now, and every lead that
    /// appears with it later (the number is suppressed).
    Account,
}

impl std::fmt::Display for Scope {
    /// `account`, or the organizations' ids, each quoted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Account => f.write_str("account"),
            Scope::Organizations(orgs) => {
                for (i, org) in orgs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{org:?}")?;
                }
                Ok(())
            }
        }
    }
}

/// What the entries of one list say of it.
#[derive(Debug, Clone)]
pub struct ListEvidence {
    /// The account of the service the list is recorded in.
    pub account: AccountId,
    /// The file as named by whoever imported it (`-` for standard input).
    pub file: String,
    pub sha256: String,
    /// An admin token's name, or `cli:USER`.
    pub actor: String,
    pub reason: Option<String>,
}

/// One number of a list: E.164, and the line it was first on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedNumber {
    pub phone_number: String,
    pub line: u64,
}

/// What recording (or, in a dry run, planning) a batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// (organization, number) pairs opted out already.
    pub already_opted_out: u64,
    /// Entries recorded (or that would be).
    pub recorded: u64,
    /// Numbers suppressed that were not.
    pub suppressed: u64,
    /// Opt-outs queued for the service.
    pub pushes: u64,
}

impl std::ops::AddAssign for BatchCounts {
    fn add_assign(&mut self, other: Self) {
        self.already_opted_out += other.already_opted_out;
        self.recorded += other.recorded;
        self.suppressed += other.suppressed;
        self.pushes += other.pushes;
    }
}

/// Records `numbers` (distinct) for `scope`; with `dry_run` only counts what it would do.
pub async fn record_batch<T: ApplyTx + ?Sized>(
    tx: &mut T,
    scope: &Scope,
    list: &ListEvidence,
    numbers: &[ListedNumber],
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<BatchCounts, crate::store::Error> {
    let entry = |number: &ListedNumber, org: &str| observation(list, number, org, now);
    let batch = Batch {
        scope,
        numbers,
        now,
        dry_run,
        opted_out: true,
    };
    record_opt_outs(tx, &list.account, batch, entry).await
}

/// Numbers to opt out in one account: for `scope`, at `now`, or (`dry_run`) only counted.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub scope: &'a Scope,
    /// Distinct.
    pub numbers: &'a [ListedNumber],
    pub now: DateTime<Utc>,
    pub dry_run: bool,
    /// What the entries say: an opt-out (every caller but a source's opt-ins read back).
    pub opted_out: bool,
}

/// Records the opt-outs of `batch` in `account`, each (organization, number) not opted out
/// already as the observation `entry` makes of it; the account-wide ones suppress their
/// numbers, the others of mirrored leads are queued for the service. With
/// `batch.opted_out` false, the same for opt-ins: each pair not opted in already, the
/// account-wide ones lifting their numbers' suppression.
pub async fn record_opt_outs<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    batch: Batch<'_>,
    entry: impl Fn(&ListedNumber, &str) -> ConsentObservation,
) -> Result<BatchCounts, crate::store::Error> {
    let read = read_batch(tx, account, &batch).await?;
    record_read(tx, account, batch, read, entry).await
}

/// [`record_opt_outs`], but for the numbers held already, left alone whole: those that
/// every organization holding them (or each of the scope's organizations) says so of
/// already, one at least. What a source reads back of such a number changes nothing (not
/// even an account-wide entry it lacks). Gives back which numbers were held, read in the
/// same transaction as the rest, after their locks.
pub async fn record_unless_held<'n, T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    batch: Batch<'n>,
    entry: impl Fn(&ListedNumber, &str) -> ConsentObservation,
) -> Result<(BatchCounts, HashSet<&'n str>), crate::store::Error> {
    let mut read = read_batch(tx, account, &batch).await?;
    let held = held(&read, batch.scope, batch.opted_out);
    read.targets
        .retain(|(number, _)| !held.contains(number.phone_number.as_str()));
    let counts = record_read(tx, account, batch, read, entry).await?;
    Ok((counts, held))
}

/// The numbers of `read` held already: for the whole account, those with a state in one
/// organization at least (the account-wide one too) and every one of them saying
/// `opted_out`; for some organizations, those each of them says it of.
fn held<'n>(read: &Read<'n>, scope: &Scope, opted_out: bool) -> HashSet<&'n str> {
    let says_so = |org: &str, phone: &str| {
        state_of(&read.states, org, phone).map(|s| s.rank.opted_out == opted_out)
    };
    read.targets
        .iter()
        .filter(|(number, orgs)| {
            let phone = number.phone_number.as_str();
            let mut holding = orgs.iter().map(|o| says_so(o, phone));
            match scope {
                Scope::Organizations(_) => holding.all(|s| s == Some(true)),
                Scope::Account => {
                    let holding: Vec<bool> = holding.flatten().collect();
                    !holding.is_empty() && holding.into_iter().all(|s| s)
                }
            }
        })
        .map(|(number, _)| number.phone_number.as_str())
        .collect()
}

/// What a batch's numbers stand at, read after their locks: the organizations each is
/// recorded in, and the stored states of those pairs.
struct Read<'n> {
    targets: Vec<(&'n ListedNumber, Vec<String>)>,
    states: ConsentStates,
}

/// Locks the numbers of `batch` (but in a dry run) and reads where they stand.
async fn read_batch<'n, T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    batch: &Batch<'n>,
) -> Result<Read<'n>, crate::store::Error> {
    let mut phones: Vec<&str> = batch
        .numbers
        .iter()
        .map(|n| n.phone_number.as_str())
        .collect();
    phones.sort_unstable();
    // A dry run writes nothing, so it takes no number's lock (and its transaction only
    // reads): it never holds up a writer.
    if !batch.dry_run {
        tx.lock_numbers(&phones).await?;
    }
    Ok(match batch.scope {
        Scope::Organizations(orgs) => {
            let targets: Vec<_> = batch.numbers.iter().map(|n| (n, orgs.clone())).collect();
            let keys: Vec<(&str, &str)> = targets
                .iter()
                .flat_map(|(n, orgs)| orgs.iter().map(|o| (o.as_str(), n.phone_number.as_str())))
                .collect();
            let states = tx.consent_states(account, &keys).await?;
            Read { targets, states }
        }
        // Every state of the numbers, in one read: their holders, and the states of the
        // pairs recorded (each held pair, and the account-wide one where there is one).
        Scope::Account => {
            let states = tx.states_of_numbers(account, &phones).await?;
            let targets = account_targets(batch.numbers, &states);
            Read { targets, states }
        }
    })
}

/// Records the targets of `read` not so already, as [`record_opt_outs`] says.
async fn record_read<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    batch: Batch<'_>,
    read: Read<'_>,
    entry: impl Fn(&ListedNumber, &str) -> ConsentObservation,
) -> Result<BatchCounts, crate::store::Error> {
    let Read { targets, states } = read;
    let mut counts = BatchCounts::default();
    let mut observations = Vec::new();
    let mut mirrored: HashSet<usize> = HashSet::new();
    for (number, orgs) in &targets {
        for org in orgs {
            let stored = state_of(&states, org, &number.phone_number);
            if stored.is_some_and(|s| s.rank.opted_out == batch.opted_out) {
                counts.already_opted_out += 1;
                continue;
            }
            if stored.is_some_and(|s| s.lead_id.is_some()) {
                mirrored.insert(observations.len());
            }
            observations.push(entry(number, org));
        }
    }
    counts.recorded = observations.len() as u64;
    if batch.dry_run {
        counts.suppressed = observations
            .iter()
            .filter(|o| o.organization_id == ACCOUNT_WIDE)
            .count() as u64;
        return Ok(counts);
    }
    let applied = super::consent::apply(tx, account, &observations, batch.now, states).await?;
    let settled = settle(tx, account, &observations, &applied, &mirrored, batch.now).await?;
    Ok(BatchCounts {
        already_opted_out: counts.already_opted_out,
        ..settled
    })
}

/// After the entries of `observations` are recorded (`applied`): the account-wide ones
/// suppress their numbers (or lift their suppression), the current others of mirrored
/// leads are queued for the service. What was recorded, suppressed and queued.
async fn settle<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[ConsentObservation],
    applied: &[crate::model::ConsentApplied],
    mirrored: &HashSet<usize>,
    now: DateTime<Utc>,
) -> Result<BatchCounts, crate::store::Error> {
    let mut counts = BatchCounts::default();
    let mut suppressing = Vec::new();
    let mut lifting = Vec::new();
    for (i, (o, outcome)) in observations.iter().zip(applied).enumerate() {
        let Some(seq) = outcome.seq else { continue };
        counts.recorded += 1;
        if o.organization_id == ACCOUNT_WIDE && !o.opted_out {
            lifting.push((o.phone_number.as_str(), o.occurred_at));
        } else if o.organization_id == ACCOUNT_WIDE {
            suppressing.push(Suppressing {
                phone_number: &o.phone_number,
                seq,
                since: o.occurred_at,
            });
        } else if mirrored.contains(&i) && outcome.current {
            // A copy older than the state in place (a shared opt-out that an opt-in there
            // came after) is recorded, superseded, and never sent: the service has the
            // later act.
            tx.queue_push(account, seq, o, now).await?;
            counts.pushes += 1;
        }
    }
    counts.suppressed = suppressing.len() as u64;
    tx.suppress(account, &suppressing).await?;
    if !lifting.is_empty() {
        tx.lift_suppressions(account, &lifting).await?;
    }
    Ok(counts)
}

/// The organizations each number is recorded in for the whole account: [`ACCOUNT_WIDE`]
/// first (an earlier import's entry holds it too), then every organization holding the
/// number, by id.
fn account_targets<'n>(
    numbers: &'n [ListedNumber],
    states: &ConsentStates,
) -> Vec<(&'n ListedNumber, Vec<String>)> {
    let mut holding: HashMap<&str, Vec<&str>> = HashMap::new();
    for (org, phone) in states.0.keys() {
        holding
            .entry(phone.as_str())
            .or_default()
            .push(org.as_str());
    }
    numbers
        .iter()
        .map(|n| {
            let mut held = holding.remove(n.phone_number.as_str()).unwrap_or_default();
            held.sort_unstable();
            let orgs = std::iter::once(ACCOUNT_WIDE)
                .chain(held)
                .map(str::to_owned)
                .collect::<Vec<_>>();
            (n, dedup(orgs))
        })
        .collect()
}

fn dedup(mut orgs: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    orgs.retain(|o| seen.insert(o.clone()));
    orgs
}

fn state_of<'s>(states: &'s ConsentStates, org: &str, phone: &str) -> Option<&'s StoredConsent> {
    states.0.get(&(org.to_owned(), phone.to_owned()))
}

fn observation(
    list: &ListEvidence,
    number: &ListedNumber,
    organization_id: &str,
    now: DateTime<Utc>,
) -> ConsentObservation {
    ConsentObservation {
        organization_id: organization_id.to_owned(),
        phone_number: number.phone_number.clone(),
        lead_id: None,
        opted_out: true,
        occurred_at: now,
        source: Source::Import,
        event_ref: format!("import:{}:{}", list.sha256, number.line),
        tag_id: None,
        reason: list.reason.clone(),
        evidence: Some(KeptEvidence::Import {
            file: list.file.clone(),
            sha256: list.sha256.clone(),
            line: number.line,
            actor: list.actor.clone(),
            reason: list.reason.clone(),
        }),
    }
}
