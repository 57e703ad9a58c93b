//! The messages sent to each opt-out's lead after it: the confirmation, and the others
//! sent before the next opt-in of its pair.

use std::collections::HashMap;

use chrono::DateTime;

use super::super::{Message, Rules};
use super::PAGE;
use crate::model::{LeadMessage, OptOutRow, Timestamp};
use crate::store::{ComplianceStore, Pool};

/// For each of `rows`, the confirmation and the other messages sent to its lead after it
/// and before the next opt-in of its pair.
pub(super) async fn messages_after(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Vec<(Option<Message>, Vec<Message>)>, crate::store::Error> {
    let mut found = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(PAGE) {
        let mut leads: Vec<&str> = chunk.iter().flat_map(OptOutRow::leads).collect();
        leads.sort_unstable();
        leads.dedup();
        // Lead ids are per account: a message is its account's lead's.
        let mut by_lead: HashMap<(String, String), Vec<LeadMessage>> = HashMap::new();
        for message in pool.messages_of_leads(&leads).await? {
            by_lead
                .entry((message.account_id.clone(), message.lead_id.clone()))
                .or_default()
                .push(message);
        }
        for row in chunk {
            found.push(after(row, rules, &by_lead));
        }
    }
    Ok(found)
}

pub(super) fn after(
    row: &OptOutRow,
    rules: &Rules,
    by_lead: &HashMap<(String, String), Vec<LeadMessage>>,
) -> (Option<Message>, Vec<Message>) {
    let from = row.occurred_at.at();
    let until = row.opted_in_at.map(Timestamp::at);
    let mut messages: Vec<Message> = row
        .leads()
        .filter_map(|lead| by_lead.get(&(row.account_id.to_string(), lead.to_owned())))
        .flatten()
        .filter_map(|m| {
            let created = DateTime::parse_from_rfc3339(m.created_at.as_deref()?)
                .ok()?
                .to_utc();
            (created > from && until.is_none_or(|until| created < until)).then(|| Message {
                id: m.id.clone(),
                status: m.status.clone(),
                created_at: Timestamp(created),
            })
        })
        .collect();
    messages.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    messages.dedup_by(|a, b| a.id == b.id);
    let confirmation = messages
        .first()
        .filter(|m| m.created_at.at() - from <= rules.confirmation_window)
        .cloned();
    if confirmation.is_some() {
        messages.remove(0);
    }
    (confirmation, messages)
}
