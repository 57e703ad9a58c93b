//! The report written as it is read, a page at a time: the contract's JSON (the window, the
//! items, then what sums them up: a JSON object's members have no order) and the CSV (a
//! row per opt-out). What is written of a page is sent before the next is read, so memory
//! holds one page whatever the window.

use super::{Item, Items, Rules, Summary, Tally, Window};
use crate::model::Timestamp;

/// The forms that list every opt-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Json,
    Csv,
}

/// Why a report stopped half-way.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error("cannot write the report: {0}")]
    Io(#[from] std::io::Error),
}

/// Where a report is written.
pub trait Sink: Send {
    fn put(&mut self, bytes: Vec<u8>) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// A response body's pages, sent to whoever reads the body.
impl Sink for tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>> {
    async fn put(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
        self.send(Ok(bytes::Bytes::from(bytes)))
            .await
            .map_err(|_| std::io::Error::other("the reader left"))
    }
}

/// A file or standard output (the CLI).
pub struct Blocking<W>(pub W);

impl<W: std::io::Write + Send> Sink for Blocking<W> {
    async fn put(&mut self, bytes: Vec<u8>) -> std::io::Result<()> {
        self.0.write_all(&bytes)
    }
}

/// Reads the report of `items` page by page, writing each in `form` to `sink`, and returns
/// what sums it up.
pub async fn write(
    mut items: Items,
    rules: &Rules,
    window: &Window,
    form: Listing,
    sink: &mut impl Sink,
) -> Result<Summary, WriteError> {
    let mut tally = Tally::new(rules, window);
    let names = tally.names().to_vec();
    let records = tally.records().to_vec();
    sink.put(match form {
        Listing::Json => json_head(window, rules),
        Listing::Csv => csv_row(&csv_header(&names, &records))?,
    })
    .await?;
    let mut first = true;
    while let Some(page) = items.next_page().await? {
        tally.add(&page);
        let bytes = match form {
            Listing::Json => json_page(&page, &mut first)?,
            Listing::Csv => csv_page(&page, &names, &records)?,
        };
        sink.put(bytes).await?;
    }
    let mut summary = tally.finish();
    summary.sources = items.sources().await?;
    summary.review = items.review().await?;
    if form == Listing::Json {
        sink.put(json_tail(&summary)?).await?;
    }
    Ok(summary)
}

/// Adds up the report of `items` without writing it (the text and the printable file).
pub async fn summarize(
    mut items: Items,
    rules: &Rules,
    window: &Window,
) -> Result<Summary, crate::store::Error> {
    let mut tally = Tally::new(rules, window);
    while let Some(page) = items.next_page().await? {
        tally.add(&page);
    }
    let mut summary = tally.finish();
    summary.sources = items.sources().await?;
    summary.review = items.review().await?;
    Ok(summary)
}

fn json_head(window: &Window, rules: &Rules) -> Vec<u8> {
    format!(
        "{{\"since\":\"{}\",\"until\":\"{}\",\"deadlineBusinessDays\":{},\"items\":[",
        Timestamp(window.since),
        Timestamp(window.until),
        rules.deadline_business_days
    )
    .into_bytes()
}

/// A page of items, each on a line of its own.
fn json_page(page: &[Item], first: &mut bool) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::with_capacity(page.len() * 512);
    for item in page {
        if !std::mem::take(first) {
            out.push(b',');
        }
        out.push(b'\n');
        serde_json::to_writer(&mut out, item)?;
    }
    Ok(out)
}

fn json_tail(summary: &Summary) -> Result<Vec<u8>, std::io::Error> {
    let mut out = b"\n],\"totals\":".to_vec();
    serde_json::to_writer(&mut out, &summary.totals)?;
    out.extend_from_slice(b",\"destinations\":");
    serde_json::to_writer(&mut out, &summary.destinations)?;
    out.extend_from_slice(b",\"sources\":");
    serde_json::to_writer(&mut out, &summary.sources)?;
    out.extend_from_slice(b",\"review\":");
    serde_json::to_writer(&mut out, &summary.review)?;
    out.extend_from_slice(b"}\n");
    Ok(out)
}

/// The CSV's columns: one per destination (`honouredAt:NAME`) after the opt-out's own, then
/// two per system of record: `outcome:NAME` (`sent`, `unmatched`, `refused`; empty while it
/// has none) and `reason:NAME` (why it was unmatched or refused).
fn csv_header(names: &[String], records: &[String]) -> Vec<String> {
    let own = [
        "seq",
        "phoneNumber",
        "organizationId",
        "leadId",
        "occurredAt",
        "source",
        "state",
        "deadline",
        "honouredAt",
    ];
    let mut header: Vec<String> = own.map(str::to_owned).to_vec();
    header.extend(names.iter().map(|n| format!("honouredAt:{n}")));
    for n in records {
        header.extend([format!("outcome:{n}"), format!("reason:{n}")]);
    }
    header.extend([
        "confirmation".to_owned(),
        "sentAfterOptOut".to_owned(),
        "accountId".to_owned(),
        "readBy".to_owned(),
        "seenAt".to_owned(),
    ]);
    header
}

fn csv_page(
    page: &[Item],
    names: &[String],
    records: &[String],
) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::with_capacity(page.len() * 200);
    for item in page {
        out.extend(csv_row(&csv_cells(item, names, records))?);
    }
    Ok(out)
}

/// An opt-out's row. Ids, statuses and reasons come from outside (a token holder names the
/// organization; the service names leads and messages; a system of record words its
/// refusals), so a cell that a spreadsheet would take for a formula is neutralised;
/// numbers, times and states are the daemon's own.
fn csv_cells(item: &Item, names: &[String], records: &[String]) -> Vec<String> {
    let safe = |text: &str| crate::model::text::spreadsheet_safe(text).into_owned();
    let time = |at: Option<Timestamp>| at.map(|t| t.to_string()).unwrap_or_default();
    let mut row = vec![
        item.seq.to_string(),
        item.phone_number.clone(),
        safe(&item.organization_id),
        safe(item.lead_id.as_deref().unwrap_or_default()),
        item.occurred_at.to_string(),
        item.source.to_string(),
        item.state.as_str().to_owned(),
        item.deadline.to_string(),
        time(item.honoured_at),
    ];
    for name in names {
        row.push(match item.destinations.iter().find(|d| d.name == *name) {
            None => "n/a".to_owned(),
            Some(d) => time(d.honoured_at),
        });
    }
    for name in records {
        let (outcome, reason) = match item.destinations.iter().find(|d| d.name == *name) {
            None => ("n/a", String::new()),
            Some(d) => match (d.outcome, d.honoured_at) {
                (Some(outcome), _) => (outcome.as_str(), safe(d.reason.as_deref().unwrap_or(""))),
                (None, Some(_)) => (crate::model::OutcomeKind::Sent.as_str(), String::new()),
                (None, None) => ("", String::new()),
            },
        };
        row.extend([outcome.to_owned(), reason]);
    }
    row.push(safe(
        item.confirmation.as_ref().map_or("", |m| m.id.as_str()),
    ));
    let sent: Vec<&str> = item
        .sent_after_opt_out
        .iter()
        .map(|m| m.id.as_str())
        .collect();
    row.push(safe(&sent.join(" ")));
    row.push(safe(&item.account_id));
    row.push(item.read_by.clone().unwrap_or_default());
    row.push(item.seen_at.to_string());
    row
}

fn csv_row(cells: &[String]) -> Result<Vec<u8>, std::io::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(cells).map_err(std::io::Error::other)?;
    writer
        .into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compliance::State;
    use crate::model::Source;

    #[test]
    fn a_cell_a_spreadsheet_would_run_starts_with_a_quote_and_the_number_stays_a_number() {
        let at: Timestamp = "2026-11-23T15:00:00Z".parse().expect("time");
        let item = Item {
            seq: 7,
            phone_number: "+15550000001".into(),
            organization_id: "=HYPERLINK(\"http://evil.example/\",\"click\")".into(),
            account_id: crate::model::DEFAULT_ACCOUNT.into(),
            lead_id: Some("@lead".into()),
            occurred_at: at,
            source: Source::Local,
            read_by: None,
            seen_at: at,
            state: State::Pending,
            deadline: at,
            honoured_at: None,
            destinations: Vec::new(),
            confirmation: None,
            sent_after_opt_out: Vec::new(),
        };
        let cells = csv_cells(&item, &[], &[]);
        assert_eq!(cells[1], "+15550000001");
        assert!(cells[2].starts_with("'="), "{}", cells[2]);
        assert_eq!(cells[3], "'@lead");
    }
}
