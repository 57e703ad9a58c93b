//! How the CLI prints: JSON for `--json`, and the one-line forms shared by commands.
//!
//! Text that came from elsewhere (the service, a delivery, a subscriber's answer) is printed
//! through [`Escaped`] in text output, so that a control character in it shows as an escape
//! instead of moving the cursor or rewriting the line; JSON output is escaped by its encoder.

use serde::Serialize;

use super::CliError;
use crate::model::text::Escaped;
use crate::model::{DestinationView, OutcomeRecord, RegistrationCheck, SubscriberView};

/// `value` as pretty JSON on standard output.
pub(super) fn print_json<T: Serialize>(value: &T) -> Result<(), CliError> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).map_err(anyhow::Error::from)?
    );
    Ok(())
}

/// One line per subscriber: name, URL, state, cursor and lag, and what went wrong last.
pub(super) fn subscriber_line(s: &SubscriberView) -> String {
    let mut line = format!(
        "{} -> {}: {}, cursor {}, {} entries behind ({:.1}s)",
        s.name, s.url, s.state, s.cursor, s.lag_entries, s.lag_seconds
    );
    if let Some(at) = &s.last_success_at {
        line.push_str(&format!(", last delivered {at}"));
    }
    if let Some(at) = &s.next_attempt_at {
        line.push_str(&format!(", next attempt {at}"));
    }
    if let Some(error) = &s.last_error {
        line.push_str(&format!(", last error: {}", Escaped(error)));
    }
    line
}

/// One line per destination: name, kind, state, cursor and lag, outcomes, last error.
pub(super) fn destination_line(d: &DestinationView) -> String {
    let mut line = format!(
        "{} ({}): {}, cursor {}, {} entries behind ({:.1}s), {} sent, {} unmatched, {} refused",
        d.name,
        d.kind,
        d.state,
        d.cursor,
        d.lag_entries,
        d.lag_seconds,
        d.sent,
        d.unmatched,
        d.refused
    );
    for (count, what) in [
        (d.already, "told already"),
        (d.through_leads, "through their leads"),
        (d.unconfirmed, "unconfirmed"),
    ] {
        if count > 0 {
            line.push_str(&format!(", {count} {what}"));
        }
    }
    if let Some(at) = &d.last_success_at {
        line.push_str(&format!(", last sent {at}"));
    }
    if let Some(error) = &d.last_error {
        line.push_str(&format!(", last error: {}", Escaped(error)));
    }
    line
}

/// One line per outcome: seq, number, organization, outcome, when, why.
pub(super) fn outcome_line(o: &OutcomeRecord) -> String {
    let mut line = format!(
        "{} {} {} {} at {}",
        o.seq,
        o.phone_number,
        Escaped(&o.organization_id),
        o.outcome,
        o.at
    );
    if let Some(reason) = &o.reason {
        line.push_str(&format!(": {}", Escaped(reason)));
    }
    line
}

/// The last check of the webhook registrations in a line: `ok`, or its problems.
pub(super) fn registration_line(check: Option<&RegistrationCheck>) -> String {
    match check {
        None => "never checked (outreach-sync webhooks check)".into(),
        Some(c) if c.ok => format!("ok at {} ({})", c.checked_at, Escaped(&c.target_url)),
        Some(c) => format!(
            "FAILING at {} ({}): {}",
            c.checked_at,
            Escaped(&c.target_url),
            Escaped(&c.problems.join("; "))
        ),
    }
}
