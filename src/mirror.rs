//! The apply path shared by the worker, the reconciler and local changes: the lead mirror,
//! message statuses and the append-only consent ledger, written inside the caller's
//! transaction.
//!
//! Merges are order-independent: the state kept is the maximum of a total order over
//! observations, so any order and any duplication of the same events ends in one state.
//! Every function takes a whole batch and issues a handful of statements for it (multi-row
//! statements with bound values, or one JSON array read with `json_each`), because each
//! statement costs a thread hop.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::SqliteConnection;

use crate::db;
use crate::events::{Lead, MessageStatus, is_terminal};

/// Where a consent observation comes from (the contract's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Webhook,
    Reconcile,
    Local,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Webhook => "webhook",
            Source::Reconcile => "reconcile",
            Source::Local => "local",
        }
    }
}

/// One consent observation of one (organization, number).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentObservation {
    pub organization_id: String,
    pub phone_number: String,
    pub lead_id: Option<String>,
    pub opted_out: bool,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
    /// Identifies the event: one ledger entry per event and (organization, number).
    pub event_ref: String,
    pub tag_id: Option<String>,
    pub reason: Option<String>,
}

/// What applying one consent observation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsentApplied {
    /// The new ledger entry; `None` when this event was already recorded.
    pub seq: Option<i64>,
    /// Whether it became the current state when applied.
    pub current: bool,
    /// Whether a newer state was already in place.
    pub superseded: bool,
}

/// The rank of a consent state: later event time wins, then opt-out over opt-in at the same
/// instant (the cautious answer to a tie). SQL compares the same row value
/// `(changed_at, opted_out)`.
type Rank = (String, bool);

/// Rows per multi-row statement: at most 11 parameters each, under SQLite's 32,766.
const ROWS_PER_STATEMENT: usize = 1000;

/// One ledger row to insert.
struct LedgerRow<'a> {
    o: &'a str,
    l: Option<&'a str>,
    p: &'a str,
    out: bool,
    at: &'a str,
    src: &'static str,
    r: &'a str,
    sup: bool,
    tag: Option<&'a str>,
    why: Option<&'a str>,
}

/// One current-state row to upsert.
struct StateRow<'a> {
    o: &'a str,
    p: &'a str,
    l: Option<&'a str>,
    out: bool,
    at: &'a str,
    src: &'static str,
    seq: i64,
    /// The pair had a state stored before this call.
    stored: bool,
}

/// The current consent of some (organization, number) pairs, as stored.
#[derive(Debug, Default)]
pub struct ConsentStates(HashMap<(String, String), (Rank, Option<String>)>);

impl ConsentStates {
    /// The stored state of each known pair of `keys`.
    pub async fn load(
        conn: &mut SqliteConnection,
        keys: &[(&str, &str)],
    ) -> Result<Self, sqlx::Error> {
        let rows: Vec<(String, String, String, bool, Option<String>)> = db::json_rows(
            conn,
            "SELECT json_group_array(json_array(s.organization_id, s.phone_number, s.changed_at,
                                                json(iif(s.opted_out, 'true', 'false')), s.lead_id))
             FROM json_each(?) AS k
             JOIN consent_state AS s ON s.organization_id = k.value ->> 0 AND s.phone_number = k.value ->> 1",
            db::json_param(keys)?,
        )
        .await?;
        Ok(Self(
            rows.into_iter()
                .map(|(o, p, at, out, lead)| ((o, p), ((at, out), lead)))
                .collect(),
        ))
    }

    /// Whether the pair is opted out; `None` if nothing is known of it.
    pub fn opted_out(&self, organization_id: &str, phone_number: &str) -> Option<bool> {
        self.0
            .get(&(organization_id.to_owned(), phone_number.to_owned()))
            .map(|((_, out), _)| *out)
    }
}

/// Records every observation in the ledger, in order, and moves the current state of each
/// (organization, number) to the highest-ranked one. The outcome is the one of applying
/// the observations one by one.
pub async fn apply_consent(
    conn: &mut SqliteConnection,
    observations: &[ConsentObservation],
    now: DateTime<Utc>,
) -> Result<Vec<ConsentApplied>, sqlx::Error> {
    if observations.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<(&str, &str)> = observations
        .iter()
        .map(|o| (o.organization_id.as_str(), o.phone_number.as_str()))
        .collect();
    let states = ConsentStates::load(conn, &keys).await?;
    apply_consent_over(conn, observations, now, states).await
}

/// [`apply_consent`] over states the caller loaded in this transaction; they must cover
/// every pair of `observations`.
pub async fn apply_consent_over(
    conn: &mut SqliteConnection,
    observations: &[ConsentObservation],
    now: DateTime<Utc>,
    states: ConsentStates,
) -> Result<Vec<ConsentApplied>, sqlx::Error> {
    if observations.is_empty() {
        return Ok(Vec::new());
    }
    let stored = states.0;
    // The winners of this batch so far, over the stored states.
    let mut overlay: HashMap<(String, String), (Rank, Option<String>)> = HashMap::new();

    // Walk the batch in order, as if each were applied alone.
    let times: Vec<String> = observations
        .iter()
        .map(|o| db::timestamp(o.occurred_at))
        .collect();
    let mut decisions = Vec::with_capacity(observations.len());
    for (o, at) in observations.iter().zip(&times) {
        let key = (o.organization_id.clone(), o.phone_number.clone());
        let rank: Rank = (at.clone(), o.opted_out);
        let (wins, superseded, known_lead) = match overlay.get(&key).or_else(|| stored.get(&key)) {
            None => (true, false, None),
            Some((current, lead)) => (rank > *current, *current > rank, lead.clone()),
        };
        let lead_id = o.lead_id.clone().or(known_lead);
        let was_stored = stored.contains_key(&key);
        if wins {
            overlay.insert(key, (rank, lead_id.clone()));
        }
        decisions.push((wins, superseded, lead_id, was_stored));
    }

    let ledger: Vec<LedgerRow> = observations
        .iter()
        .zip(&times)
        .zip(&decisions)
        .map(|((o, at), (_, superseded, lead_id, _))| LedgerRow {
            o: &o.organization_id,
            l: lead_id.as_deref(),
            p: &o.phone_number,
            out: o.opted_out,
            at,
            src: o.source.as_str(),
            r: &o.event_ref,
            sup: *superseded,
            tag: o.tag_id.as_deref(),
            why: o.reason.as_deref(),
        })
        .collect();
    let recorded_at = db::timestamp(now);
    // The seq of each entry this call adds, by (event_ref, organization, number): a row
    // per entry back from SQLite would cost a hand-over between its thread and this task
    // each, so the seqs follow from each statement's outcome instead.
    let mut seqs: HashMap<(&str, &str, &str), i64> = HashMap::with_capacity(ledger.len());
    for chunk in ledger.chunks(ROWS_PER_STATEMENT) {
        // OR IGNORE, for the one constraint a row can break here (the event is in the
        // ledger already: every other column is bound from a value that cannot be null, and
        // `source` from its enum): a statement that cannot abort needs no statement journal,
        // which would otherwise copy every index page it touches.
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT OR IGNORE INTO ledger (organization_id, lead_id, phone_number, opted_out,
                 occurred_at, recorded_at, source, event_ref, superseded, tag_id, reason) ",
        );
        insert.push_values(chunk, |mut row, e| {
            row.push_bind(e.o)
                .push_bind(e.l)
                .push_bind(e.p)
                .push_bind(e.out)
                .push_bind(e.at)
                .push_bind(&recorded_at)
                .push_bind(e.src)
                .push_bind(e.r)
                .push_bind(e.sup)
                .push_bind(e.tag)
                .push_bind(e.why);
        });
        let done = insert.build().execute(&mut *conn).await?;
        if let Some(range) = db::consecutive_rowids(&done, chunk.len()) {
            seqs.extend(range.zip(chunk).map(|(seq, e)| ((e.r, e.o, e.p), seq)));
            continue;
        }
        // Some were in the ledger already. Every seq added now is above every older one
        // (AUTOINCREMENT), so the new entries are the chunk's largest `rows_affected`.
        let keys: Vec<(&str, &str, &str)> = chunk.iter().map(|e| (e.r, e.o, e.p)).collect();
        // (seq, index of the entry in `chunk`)
        let mut found: Vec<(i64, usize)> = db::json_rows(
            conn,
            "SELECT json_group_array(json_array(l.seq, k.key))
             FROM json_each(?) AS k
             JOIN ledger AS l ON l.event_ref = k.value ->> 0
                             AND l.organization_id = k.value ->> 1
                             AND l.phone_number = k.value ->> 2",
            db::json_param(&keys)?,
        )
        .await?;
        found.sort_unstable_by_key(|&(seq, _)| std::cmp::Reverse(seq));
        found.truncate(usize::try_from(done.rows_affected()).unwrap_or(usize::MAX));
        seqs.extend(
            found
                .into_iter()
                .filter_map(|(seq, i)| Some((*keys.get(i)?, seq))),
        );
    }

    let mut results = Vec::with_capacity(observations.len());
    let mut winners = Vec::new();
    for ((o, at), (wins, superseded, lead_id, was_stored)) in
        observations.iter().zip(&times).zip(&decisions)
    {
        let seq = seqs
            .get(&(
                o.event_ref.as_str(),
                o.organization_id.as_str(),
                o.phone_number.as_str(),
            ))
            .copied();
        // An event already in the ledger was applied before: its state is in place.
        let current = *wins && seq.is_some();
        if let (true, Some(seq)) = (current, seq) {
            winners.push(StateRow {
                o: &o.organization_id,
                p: &o.phone_number,
                l: lead_id.as_deref(),
                out: o.opted_out,
                at,
                src: o.source.as_str(),
                seq,
                stored: *was_stored,
            });
        }
        results.push(ConsentApplied {
            seq,
            current,
            superseded: seq.is_some() && *superseded,
        });
    }
    // Each pair ends in its last winner (each winner outranks those before it). Pairs with
    // no stored state are plain inserts, which cannot abort and so need no statement
    // journal (see the ledger above); the others are updated where still older.
    let mut seen = HashSet::new();
    let mut last: Vec<&StateRow> = winners
        .iter()
        .rev()
        .filter(|w| seen.insert((w.o, w.p)))
        .collect();
    last.reverse();
    let (known, fresh): (Vec<&StateRow>, Vec<&StateRow>) = last.into_iter().partition(|w| w.stored);
    for (rows, insert_sql, conflict) in [
        (fresh, "INSERT OR IGNORE INTO", ""),
        (
            known,
            "INSERT INTO",
            " ON CONFLICT (organization_id, phone_number) DO UPDATE SET
                lead_id = COALESCE(excluded.lead_id, lead_id), opted_out = excluded.opted_out,
                changed_at = excluded.changed_at, source = excluded.source, seq = excluded.seq
             WHERE (excluded.changed_at, excluded.opted_out) > (changed_at, opted_out)",
        ),
    ] {
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let mut upsert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
                "{insert_sql} consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq) "
            ));
            upsert.push_values(chunk, |mut row, w| {
                row.push_bind(w.o)
                    .push_bind(w.p)
                    .push_bind(w.l)
                    .push_bind(w.out)
                    .push_bind(w.at)
                    .push_bind(w.src)
                    .push_bind(w.seq);
            });
            upsert.push(conflict);
            upsert.build().execute(&mut *conn).await?;
        }
    }
    Ok(results)
}

/// The organizations (and lead ids) that hold each of `phones`: what account sync extends a
/// change to. Every mirrored lead has the consent record of its (organization, number),
/// written in the transaction that mirrored it, so the consent records are enough.
pub async fn holders_of(
    conn: &mut SqliteConnection,
    phones: &[&str],
) -> Result<HashMap<String, Vec<(String, Option<String>)>>, sqlx::Error> {
    let rows: Vec<(String, String, Option<String>)> = sqlx::query_as(
        "SELECT s.phone_number, s.organization_id, s.lead_id
         FROM (SELECT DISTINCT value FROM json_each(?1)) AS p
         JOIN consent_state AS s ON s.phone_number = p.value",
    )
    .bind(db::json_param(phones)?)
    .fetch_all(&mut *conn)
    .await?;
    let mut holders: HashMap<String, Vec<(String, Option<String>)>> = HashMap::new();
    for (phone, org, lead) in rows {
        holders.entry(phone).or_default().push((org, lead));
    }
    Ok(holders)
}

/// The (organization, number) of each of `lead_ids` the mirror knows.
pub async fn locate_leads(
    conn: &mut SqliteConnection,
    lead_ids: &[&str],
) -> Result<HashMap<String, (String, String)>, sqlx::Error> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT l.id, l.organization_id, l.phone_number FROM json_each(?1) AS k JOIN leads AS l ON l.id = k.value
         UNION ALL
         SELECT s.lead_id, s.organization_id, s.phone_number FROM json_each(?1) AS k
         JOIN consent_state AS s ON s.lead_id = k.value",
    )
    .bind(db::json_param(lead_ids)?)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(|(id, o, p)| (id, (o, p))).collect())
}

/// Inserts or updates mirrored leads, each only if its observation is not older than what
/// the mirror holds and its fields changed (an unchanged lead is not rewritten on every
/// scan). A lead's consent is the `consent_state` of its number, set by [`apply_consent`].
/// Rows are bound as parameters: for wide rows that is cheaper than JSON extraction.
pub async fn upsert_leads(
    conn: &mut SqliteConnection,
    leads: &[(&Lead, DateTime<Utc>)],
    now: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    if leads.is_empty() {
        return Ok(0);
    }
    let now = db::timestamp(now);
    // Leads the mirror does not have yet are plain inserts, which cannot abort and so need
    // no statement journal (see `apply_consent_over`); the others (and a lead's later
    // observations in the same batch) are updated where newer and different.
    let ids: Vec<&str> = leads.iter().map(|(lead, _)| lead.id.as_str()).collect();
    let stored: HashSet<String> = db::json_rows::<String, _>(
        conn,
        "SELECT json_group_array(l.id) FROM json_each(?) AS k JOIN leads AS l ON l.id = k.value",
        db::json_param(&ids)?,
    )
    .await?
    .into_iter()
    .collect();
    let mut first = HashSet::new();
    type Observed<'a> = &'a (&'a Lead, DateTime<Utc>);
    let (fresh, known): (Vec<Observed>, Vec<Observed>) = leads.iter().partition(|(lead, _)| {
        !stored.contains(lead.id.as_str()) && first.insert(lead.id.as_str())
    });
    let mut written = 0;
    for (rows, insert_sql, conflict) in [
        (fresh, "INSERT OR IGNORE INTO", ""),
        (
            known,
            "INSERT INTO",
            " ON CONFLICT (id) DO UPDATE SET
                 organization_id = excluded.organization_id, phone_number = excluded.phone_number,
                 first_name = excluded.first_name, last_name = excluded.last_name,
                 notes = excluded.notes, follow_up = excluded.follow_up, email = excluded.email,
                 postal_code = excluded.postal_code, phone_number_type = excluded.phone_number_type,
                 active_group_ids = excluded.active_group_ids,
                 inactive_group_ids = excluded.inactive_group_ids, tag_ids = excluded.tag_ids,
                 custom_fields = excluded.custom_fields, created_at = excluded.created_at,
                 observed_at = excluded.observed_at, content_hash = excluded.content_hash,
                 updated_at = excluded.updated_at
             WHERE excluded.observed_at >= leads.observed_at
               AND excluded.content_hash <> leads.content_hash",
        ),
    ] {
        for chunk in rows.chunks(LEADS_PER_STATEMENT) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(format!(
                "{insert_sql} leads (id, organization_id, phone_number, first_name, last_name,
                     notes, follow_up, email, postal_code, phone_number_type, active_group_ids,
                     inactive_group_ids, tag_ids, custom_fields, created_at, observed_at,
                     content_hash, updated_at) "
            ));
            // Encoded first, so that a lead that cannot be encoded is an error, not a row.
            let columns = chunk
                .iter()
                .map(|(lead, _)| JsonColumns::of(lead))
                .collect::<Result<Vec<_>, _>>()?;
            let encoded = chunk.iter().zip(columns);
            insert.push_values(encoded, |mut row, ((lead, observed_at), json)| {
                let hash = content_hash(lead, &json.custom_fields);
                row.push_bind(&lead.id)
                    .push_bind(&lead.organization_id)
                    .push_bind(&lead.phone_number)
                    .push_bind(&lead.first_name)
                    .push_bind(&lead.last_name)
                    .push_bind(&lead.notes)
                    .push_bind(&lead.follow_up)
                    .push_bind(&lead.email)
                    .push_bind(&lead.postal_code)
                    .push_bind(&lead.phone_number_type)
                    .push_bind(json.active_group_ids)
                    .push_bind(json.inactive_group_ids)
                    .push_bind(json.tag_ids)
                    .push_bind(json.custom_fields)
                    .push_bind(&lead.created_at)
                    .push_bind(db::timestamp(*observed_at))
                    .push_bind(hash)
                    .push_bind(&now);
            });
            insert.push(conflict);
            written += insert.build().execute(&mut *conn).await?.rows_affected();
        }
    }
    Ok(written)
}

/// Rows per INSERT: 18 parameters each, under SQLite's 32,766.
const LEADS_PER_STATEMENT: usize = 1000;

/// A lead's JSON columns, as stored.
struct JsonColumns {
    active_group_ids: String,
    inactive_group_ids: String,
    tag_ids: String,
    custom_fields: String,
}

impl JsonColumns {
    fn of(lead: &Lead) -> Result<Self, sqlx::Error> {
        Ok(Self {
            active_group_ids: db::json_param(&lead.active_group_ids)?,
            inactive_group_ids: db::json_param(&lead.inactive_group_ids)?,
            tag_ids: db::json_param(&lead.tag_ids)?,
            custom_fields: db::json_param(&lead.custom_fields)?,
        })
    }
}

/// A hash of a lead's mirrored fields (consent excluded: it lives elsewhere), with its
/// custom fields as encoded. Should it change with a new toolchain, the next scan rewrites
/// each lead once; nothing else.
fn content_hash(lead: &Lead, custom_fields: &str) -> i64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // Every field but `global_opted_out`, without copying the lead.
    (
        &lead.id,
        &lead.organization_id,
        &lead.phone_number,
        (
            &lead.first_name,
            &lead.last_name,
            &lead.notes,
            &lead.follow_up,
        ),
        (
            &lead.email,
            &lead.postal_code,
            &lead.phone_number_type,
            &lead.created_at,
        ),
        (
            &lead.active_group_ids,
            &lead.inactive_group_ids,
            &lead.tag_ids,
        ),
        custom_fields,
    )
        .hash(&mut hasher);
    hasher.finish() as i64
}

/// One message status observation.
#[derive(Debug, Clone)]
pub struct StatusObservation<'a> {
    pub message: &'a MessageStatus,
    pub lead_id: Option<&'a str>,
    pub organization_id: Option<&'a str>,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
}

#[derive(Serialize)]
struct StatusRow<'a> {
    #[serde(flatten)]
    message: &'a MessageStatus,
    lead: Option<&'a str>,
    org: Option<&'a str>,
    terminal: bool,
    at: String,
    src: &'static str,
}

/// Applies status observations: a terminal status beats a non-terminal one whatever the
/// times; otherwise the later wins (ties broken by status text, then error code, so the
/// outcome never depends on arrival order). Returns how many changed a stored status.
pub async fn apply_statuses(
    conn: &mut SqliteConnection,
    observations: &[StatusObservation<'_>],
    now: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    if observations.is_empty() {
        return Ok(0);
    }
    let rows: Vec<StatusRow> = observations
        .iter()
        .map(|o| StatusRow {
            message: o.message,
            lead: o.lead_id,
            org: o.organization_id,
            terminal: is_terminal(&o.message.status),
            at: db::timestamp(o.occurred_at),
            src: o.source.as_str(),
        })
        .collect();
    let done = sqlx::query(
        "INSERT INTO messages (id, thread_id, status, type, created_at, error_code, lead_id,
             organization_id, terminal, status_at, source, first_seen_at, updated_at)
         SELECT value ->> 'id', value ->> 'threadId', value ->> 'status', value ->> 'type',
             value ->> 'createdAt', value ->> 'errorCode', value ->> 'lead', value ->> 'org',
             value ->> 'terminal', value ->> 'at', value ->> 'src', ?2, ?2
         FROM json_each(?1) WHERE true ORDER BY key
         ON CONFLICT (id) DO UPDATE SET
             thread_id = COALESCE(excluded.thread_id, thread_id), status = excluded.status,
             type = COALESCE(excluded.type, type), created_at = COALESCE(excluded.created_at, created_at),
             error_code = excluded.error_code, lead_id = COALESCE(excluded.lead_id, lead_id),
             organization_id = COALESCE(excluded.organization_id, organization_id),
             terminal = excluded.terminal, status_at = excluded.status_at,
             source = excluded.source, updated_at = excluded.updated_at
         WHERE (excluded.terminal, excluded.status_at, excluded.status, COALESCE(excluded.error_code, ''))
             > (terminal, status_at, status, COALESCE(error_code, ''))",
    )
    .bind(db::json_param(&rows)?)
    .bind(db::timestamp(now))
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
