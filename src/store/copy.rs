//! `migrate --from sqlite://OLD`: moves a SQLite database (ledger, mirror, outbox, pushes,
//! reconciliation state) into a freshly migrated PostgreSQL database, in one transaction:
//! all of it or nothing.
//!
//! Each table goes over in chunks of rows, read on SQLite as one JSON array
//! (`json_object` per row, bodies in hex) and written on PostgreSQL with one
//! `INSERT ... SELECT FROM jsonb_to_recordset`, which types every column on the way in:
//! RFC 3339 text becomes `timestamptz`, 0/1 becomes `boolean`, JSON text becomes `jsonb`.

use sqlx::{Connection as _, PgConnection, SqlitePool};

/// Rows per chunk.
const CHUNK: i64 = 2_000;

/// One table: its SQLite columns as a JSON object, and how PostgreSQL takes them.
struct Table {
    name: &'static str,
    /// `json_object(...)` arguments on SQLite.
    object: &'static str,
    /// `jsonb_to_recordset` column definitions on PostgreSQL.
    record: &'static str,
    /// The INSERT's column list and the SELECT list over the record `x`.
    insert: &'static str,
    select: &'static str,
    /// An identity column whose sequence must continue after the copied ids.
    identity: Option<&'static str>,
}

const TABLES: &[Table] = &[
    Table {
        name: "outbox",
        object: "'id', id, 'dedup_key', dedup_key, 'received_at', received_at, 'body', hex(body), \
                 'headers', json(headers), 'secret_index', secret_index, 'state', state, \
                 'attempts', attempts, 'last_error', last_error, 'applied_at', applied_at, \
                 'verified_header', verified_header, 'account_id', account_id",
        record: "id bigint, dedup_key text, received_at timestamptz, body text, headers jsonb, \
                 secret_index int, state text, attempts int, last_error text, applied_at timestamptz, \
                 verified_header int, account_id text",
        insert: "id, dedup_key, received_at, body, headers, secret_index, state, attempts, \
                 last_error, applied_at, verified_header, account_id",
        select: "x.id, x.dedup_key, x.received_at, decode(x.body, 'hex'), x.headers, \
                 x.secret_index, x.state, x.attempts, x.last_error, x.applied_at, \
                 x.verified_header, x.account_id",
        identity: Some("id"),
    },
    Table {
        name: "rejected_deliveries",
        object: "'id', id, 'received_at', received_at, 'reason', reason, \
                 'headers', json(headers), 'body', hex(body), 'account_id', account_id",
        record: "id bigint, received_at timestamptz, reason text, headers jsonb, body text,
             account_id text",
        insert: "id, received_at, reason, headers, body, account_id",
        select: "x.id, x.received_at, x.reason, x.headers, decode(x.body, 'hex'), x.account_id",
        identity: Some("id"),
    },
    Table {
        name: "daemon_state",
        object: "'key', key, 'value', value, 'updated_at', updated_at",
        record: "key text, value text, updated_at timestamptz",
        insert: "key, value, updated_at",
        select: "x.key, x.value, x.updated_at",
        identity: None,
    },
    Table {
        name: "leads",
        object: "'id', id, 'organization_id', organization_id, 'phone_number', phone_number, \
                 'first_name', first_name, 'last_name', last_name, 'notes', notes, \
                 'follow_up', follow_up, 'email', email, 'postal_code', postal_code, \
                 'phone_number_type', phone_number_type, \
                 'active_group_ids', json(active_group_ids), \
                 'inactive_group_ids', json(inactive_group_ids), 'tag_ids', json(tag_ids), \
                 'custom_fields', json(custom_fields), 'created_at', created_at, \
                 'observed_at', observed_at, 'content_hash', content_hash, 'updated_at', updated_at, 'account_id', account_id",
        record: "id text, organization_id text, phone_number text, first_name text, \
                 last_name text, notes text, follow_up text, email text, postal_code text, \
                 phone_number_type text, active_group_ids jsonb, inactive_group_ids jsonb, \
                 tag_ids jsonb, custom_fields jsonb, created_at text, observed_at timestamptz, \
                 content_hash bigint, updated_at timestamptz, account_id text",
        insert: "id, organization_id, phone_number, first_name, last_name, notes, follow_up, \
                 email, postal_code, phone_number_type, active_group_ids, inactive_group_ids, \
                 tag_ids, custom_fields, created_at, observed_at, content_hash, updated_at, account_id",
        select: "x.id, x.organization_id, x.phone_number, x.first_name, x.last_name, x.notes, \
                 x.follow_up, x.email, x.postal_code, x.phone_number_type, x.active_group_ids, \
                 x.inactive_group_ids, x.tag_ids, x.custom_fields, x.created_at, x.observed_at, \
                 x.content_hash, x.updated_at, x.account_id",
        identity: None,
    },
    Table {
        name: "ledger",
        object: "'seq', seq, 'organization_id', organization_id, 'lead_id', lead_id, \
                 'phone_number', phone_number, 'opted_out', opted_out, \
                 'occurred_at', occurred_at, 'recorded_at', recorded_at, 'source', source, \
                 'event_ref', event_ref, 'superseded', superseded, 'tag_id', tag_id, \
                 'reason', reason, 'hash', hash, 'evidence', json(evidence), 'account_id', account_id",
        record: "seq bigint, organization_id text, lead_id text, phone_number text, \
                 opted_out int, occurred_at timestamptz, recorded_at timestamptz, source text, \
                 event_ref text, superseded int, tag_id text, reason text, hash text, \
                 evidence jsonb, account_id text",
        insert: "seq, organization_id, lead_id, phone_number, opted_out, occurred_at, \
                 recorded_at, source, event_ref, superseded, tag_id, reason, hash, evidence, account_id",
        select: "x.seq, x.organization_id, x.lead_id, x.phone_number, x.opted_out <> 0, \
                 x.occurred_at, x.recorded_at, x.source, x.event_ref, x.superseded <> 0, \
                 x.tag_id, x.reason, x.hash, x.evidence, x.account_id",
        identity: None,
    },
    Table {
        name: "consent_state",
        object: "'organization_id', organization_id, 'phone_number', phone_number, \
                 'lead_id', lead_id, 'opted_out', opted_out, 'changed_at', changed_at, \
                 'source', source, 'seq', seq, 'account_id', account_id, 'rank_at', rank_at",
        record: "organization_id text, phone_number text, lead_id text, opted_out int, \
                 changed_at timestamptz, source text, seq bigint, account_id text, \
                 rank_at timestamptz",
        insert: "organization_id, phone_number, lead_id, opted_out, changed_at, source, seq, \
                 account_id, rank_at",
        select: "x.organization_id, x.phone_number, x.lead_id, x.opted_out <> 0, x.changed_at, \
                 x.source, x.seq, x.account_id, x.rank_at",
        identity: None,
    },
    Table {
        name: "messages",
        object: "'id', id, 'thread_id', thread_id, 'status', status, 'type', type, \
                 'created_at', created_at, 'error_code', error_code, 'lead_id', lead_id, \
                 'organization_id', organization_id, 'terminal', terminal, \
                 'status_at', status_at, 'source', source, 'first_seen_at', first_seen_at, \
                 'updated_at', updated_at, 'account_id', account_id",
        record: "id text, thread_id text, status text, type text, created_at text, \
                 error_code text, lead_id text, organization_id text, terminal int, \
                 status_at timestamptz, source text, first_seen_at timestamptz, \
                 updated_at timestamptz, account_id text",
        insert: "id, thread_id, status, type, created_at, error_code, lead_id, \
                 organization_id, terminal, status_at, source, first_seen_at, updated_at, account_id",
        select: "x.id, x.thread_id, x.status, x.type, x.created_at, x.error_code, x.lead_id, \
                 x.organization_id, x.terminal <> 0, x.status_at, x.source, x.first_seen_at, \
                 x.updated_at, x.account_id",
        identity: None,
    },
    Table {
        name: "pushes",
        object: "'seq', seq, 'organization_id', organization_id, 'phone_number', phone_number, \
                 'opted_out', opted_out, 'tag_id', tag_id, 'state', state, \
                 'attempts', attempts, 'next_attempt_at', next_attempt_at, \
                 'first_attempt_at', first_attempt_at, 'last_attempt_at', last_attempt_at, \
                 'last_error', last_error, 'lead_id', lead_id, 'created_at', created_at, \
                 'finished_at', finished_at, 'echo_ref', echo_ref, 'account_id', account_id",
        record: "seq bigint, organization_id text, phone_number text, opted_out int, \
                 tag_id text, state text, attempts int, next_attempt_at timestamptz, \
                 first_attempt_at timestamptz, last_attempt_at timestamptz, last_error text, \
                 lead_id text, created_at timestamptz, finished_at timestamptz, echo_ref text, account_id text",
        insert: "seq, organization_id, phone_number, opted_out, tag_id, state, attempts, \
                 next_attempt_at, first_attempt_at, last_attempt_at, last_error, lead_id, \
                 created_at, finished_at, echo_ref, account_id",
        select: "x.seq, x.organization_id, x.phone_number, x.opted_out <> 0, x.tag_id, \
                 x.state, x.attempts, x.next_attempt_at, x.first_attempt_at, \
                 x.last_attempt_at, x.last_error, x.lead_id, x.created_at, x.finished_at, \
                 x.echo_ref, x.account_id",
        identity: None,
    },
    // The subscribers' cursors: a moved ledger is not sent to them a second time.
    Table {
        name: "subscribers",
        object: "'name', name, 'cursor', cursor, 'generation', generation, \
                 'disabled', disabled, 'failures', failures, 'next_attempt_ms', next_attempt_ms, \
                 'last_error', last_error, 'last_success_ms', last_success_ms, \
                 'refill_until', refill_until, 'refill_reason', refill_reason",
        record: "name text, cursor bigint, generation bigint, disabled int, failures bigint, \
                 next_attempt_ms bigint, last_error text, last_success_ms bigint, \
                 refill_until bigint, refill_reason text",
        insert: "name, cursor, generation, disabled, failures, next_attempt_ms, last_error, \
                 last_success_ms, refill_until, refill_reason",
        select: "x.name, x.cursor, x.generation, x.disabled <> 0, x.failures, \
                 x.next_attempt_ms, x.last_error, x.last_success_ms, x.refill_until, \
                 x.refill_reason",
        identity: None,
    },
    Table {
        name: "reconcile_checkpoints",
        object: "'organization_id', organization_id, 'pass_id', pass_id, 'cursor', cursor, \
                 'leads_scanned', leads_scanned, 'repaired', repaired, \
                 'started_at', started_at, 'updated_at', updated_at, 'account_id', account_id",
        record: "organization_id text, pass_id text, cursor text, leads_scanned bigint, \
                 repaired bigint, started_at timestamptz, updated_at timestamptz, account_id text",
        insert: "organization_id, pass_id, cursor, leads_scanned, repaired, started_at, \
                 updated_at, account_id",
        select: "x.organization_id, x.pass_id, x.cursor, x.leads_scanned, x.repaired, \
                 x.started_at, x.updated_at, x.account_id",
        identity: None,
    },
    Table {
        name: "reconcile_organizations",
        object: "'organization_id', organization_id, 'pass_id', pass_id, \
                 'finished_at', finished_at, 'leads_scanned', leads_scanned, \
                 'repaired', repaired, 'error', error, 'account_id', account_id",
        record: "organization_id text, pass_id text, finished_at timestamptz, \
                 leads_scanned bigint, repaired bigint, error text, account_id text",
        insert: "organization_id, pass_id, finished_at, leads_scanned, repaired, error, account_id",
        select: "x.organization_id, x.pass_id, x.finished_at, x.leads_scanned, x.repaired, \
                 x.error, x.account_id",
        identity: None,
    },
    // Replies put to a person and their decisions: evidence of the opt-outs decided.
    Table {
        name: "review_replies",
        object: "'id', id, 'source', source, 'record', record, 'phone_number', phone_number, \
                 'body', body, 'matched', matched, 'stands_on', stands_on, \
                 'received_at', received_at, 'decision', decision, 'decided_by', decided_by, \
                 'decided_at', decided_at, 'reason', reason",
        record: "id bigint, source text, record text, phone_number text, body text, \
                 matched text, stands_on text, received_at timestamptz, decision text, \
                 decided_by text, decided_at timestamptz, reason text",
        insert: "id, source, record, phone_number, body, matched, stands_on, received_at, \
                 decision, decided_by, decided_at, reason",
        select: "x.id, x.source, x.record, x.phone_number, x.body, x.matched, x.stands_on, \
                 x.received_at, x.decision, x.decided_by, x.decided_at, x.reason",
        identity: Some("id"),
    },
    Table {
        name: "reconcile_passes",
        object: "'id', id, 'started_at', started_at, 'finished_at', finished_at, \
                 'summary', json(summary), 'account_id', account_id",
        record: "id text, started_at timestamptz, finished_at timestamptz, summary jsonb,
             account_id text",
        insert: "id, started_at, finished_at, summary, account_id",
        select: "x.id, x.started_at, x.finished_at, x.summary, x.account_id",
        identity: None,
    },
];

/// Why a copy did not happen; nothing was written to PostgreSQL then.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(
        "the PostgreSQL database already holds {0} ledger entries: a copy goes into an empty \
         database only"
    )]
    NotEmpty(i64),
    #[error("reading the SQLite database: {0}")]
    Source(sqlx::Error),
    #[error("writing the PostgreSQL database: {0}")]
    Target(sqlx::Error),
    /// Every row read must land: a silent shortfall would lose evidence.
    #[error("writing the PostgreSQL database: {table}: {read} rows read, {written} written")]
    Short {
        table: &'static str,
        read: i64,
        written: u64,
    },
}

/// Rows copied, per table, in the order copied.
pub type Copied = Vec<(&'static str, u64)>;

/// Copies every table of `source` (migrated to the latest SQLite schema) into `target`
/// (migrated to the latest PostgreSQL schema, and empty), in one transaction.
pub async fn sqlite_to_postgres(
    source: &SqlitePool,
    target: &mut PgConnection,
) -> Result<Copied, CopyError> {
    let mut tx = target.begin().await.map_err(CopyError::Target)?;
    let entries: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger")
        .fetch_one(&mut *tx)
        .await
        .map_err(CopyError::Target)?;
    if entries > 0 {
        return Err(CopyError::NotEmpty(entries));
    }
    let mut copied = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        let rows = copy_table(source, &mut tx, table).await?;
        if let Some(column) = table.identity {
            sqlx::query(&format!(
                "SELECT setval(pg_get_serial_sequence('{0}', '{column}'),
                               COALESCE((SELECT MAX({column}) FROM {0}), 0) + 1, false)",
                table.name
            ))
            .execute(&mut *tx)
            .await
            .map_err(CopyError::Target)?;
        }
        copied.push((table.name, rows));
    }
    // The hashes are copied as they are (the same fields give the same text on both
    // backends), so the chain goes on from the last one.
    sqlx::query(
        "UPDATE ledger_head SET seq = (SELECT COALESCE(MAX(seq), 0) FROM ledger),
             hash = COALESCE((SELECT hash FROM ledger ORDER BY seq DESC LIMIT 1), repeat('0', 64))",
    )
    .execute(&mut *tx)
    .await
    .map_err(CopyError::Target)?;
    tx.commit().await.map_err(CopyError::Target)?;
    Ok(copied)
}

async fn copy_table(
    source: &SqlitePool,
    target: &mut PgConnection,
    table: &Table,
) -> Result<u64, CopyError> {
    // Paged by rowid: every table here has one, and a page starts where the last ended.
    let read = format!(
        "SELECT COALESCE(json_group_array(json_object({})), '[]'), MAX(r), COUNT(*)
         FROM (SELECT rowid AS r, * FROM {} WHERE rowid > ? ORDER BY rowid LIMIT ?)",
        table.object, table.name
    );
    let overriding = if table.identity.is_some() {
        "OVERRIDING SYSTEM VALUE"
    } else {
        ""
    };
    let write = format!(
        "INSERT INTO {} ({}) {overriding} SELECT {} FROM jsonb_to_recordset($1::jsonb) AS x({})",
        table.name, table.insert, table.select, table.record
    );
    let (mut total, mut after) = (0, 0_i64);
    loop {
        let (chunk, last, rows): (String, Option<i64>, i64) = sqlx::query_as(&read)
            .bind(after)
            .bind(CHUNK)
            .fetch_one(source)
            .await
            .map_err(CopyError::Source)?;
        let Some(last) = last else {
            return Ok(total);
        };
        let written = sqlx::query(&write)
            .bind(&chunk)
            .execute(&mut *target)
            .await
            .map_err(CopyError::Target)?
            .rows_affected();
        if written != rows as u64 {
            // Every row read must land: a silent shortfall would lose evidence.
            return Err(CopyError::Short {
                table: table.name,
                read: rows,
                written,
            });
        }
        total += written;
        after = last;
    }
}
