//! A ledger entry as a warehouse row: the columns every warehouse table has, in one list
//! that BigQuery's schema, PostgreSQL's table and the documentation are all made from.

use super::{AccountId, LedgerEntry, Source, Timestamp};

/// What a column holds, as each warehouse names its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Integer,
    Text,
    Boolean,
    Time,
}

/// One column: its name (camelCase, as the contract names it; quoted in PostgreSQL), its
/// type, and whether every row has a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub kind: ColumnType,
    pub required: bool,
}

const fn column(name: &'static str, kind: ColumnType, required: bool) -> Column {
    Column {
        name,
        kind,
        required,
    }
}

/// The columns of a warehouse table, in order.
pub const COLUMNS: &[Column] = &[
    column("seq", ColumnType::Integer, true),
    column("accountId", ColumnType::Text, true),
    column("organizationId", ColumnType::Text, true),
    column("leadId", ColumnType::Text, false),
    column("phoneNumber", ColumnType::Text, true),
    column("optedOut", ColumnType::Boolean, true),
    column("source", ColumnType::Text, true),
    column("actor", ColumnType::Text, false),
    column("occurredAt", ColumnType::Time, true),
    column("recordedAt", ColumnType::Time, true),
    column("entryHash", ColumnType::Text, false),
];

/// One row: a ledger entry, who recorded it (an admin token's name, an import's, a
/// source's; none for the service's own events) and its hash in the ledger's chain.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub seq: i64,
    pub account_id: AccountId,
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub source: Source,
    pub actor: Option<String>,
    pub occurred_at: Timestamp,
    pub recorded_at: Timestamp,
    pub entry_hash: Option<String>,
}

/// What the ledger keeps beside an entry that its row carries: its hash, and the evidence
/// that names its actor.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct RowExtras {
    pub seq: i64,
    pub hash: Option<String>,
    pub evidence: Option<String>,
}

impl Row {
    /// The row of `entry`, with what the ledger keeps beside it.
    pub fn of(entry: &LedgerEntry, extras: Option<&RowExtras>) -> Self {
        #[derive(serde::Deserialize)]
        struct Actor {
            actor: Option<String>,
        }
        let actor = extras
            .and_then(|e| e.evidence.as_deref())
            .and_then(|text| serde_json::from_str::<Actor>(text).ok())
            .and_then(|a| a.actor);
        Self {
            seq: entry.seq,
            account_id: entry.account_id.clone(),
            organization_id: entry.organization_id.clone(),
            lead_id: entry.lead_id.clone(),
            phone_number: entry.phone_number.clone(),
            opted_out: entry.opted_out,
            source: entry.source,
            actor,
            occurred_at: entry.occurred_at,
            recorded_at: entry.recorded_at,
            entry_hash: extras.and_then(|e| e.hash.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_every_column_by_its_name_and_nothing_else() {
        let entry = LedgerEntry {
            seq: 7,
            organization_id: "org_1".into(),
            lead_id: None,
            phone_number: "+12025550143".into(),
            opted_out: true,
            occurred_at: "2026-11-21T10:00:00Z".parse().expect("a time"),
            recorded_at: "2026-11-21T10:00:01Z".parse().expect("a time"),
            source: Source::Local,
            event_ref: "local:1".into(),
            superseded: false,
            account_id: "default".parse().expect("an account"),
            push: None,
            echo_of: None,
        };
        let extras = RowExtras {
            seq: 7,
            hash: Some("ab".into()),
            evidence: Some(r#"{"actor":"cli:ana"}"#.into()),
        };
        let row = serde_json::to_value(Row::of(&entry, Some(&extras))).expect("json");
        let names: std::collections::BTreeSet<&str> = row
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let columns: std::collections::BTreeSet<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, columns);
        assert_eq!(row["actor"], "cli:ana");
        assert_eq!(row["occurredAt"], "2026-11-21T10:00:00.000Z");
        assert_eq!(row["leadId"], serde_json::Value::Null);
    }
}
