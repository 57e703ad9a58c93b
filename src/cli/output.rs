//! How the CLI prints: JSON for `--json`, and the one-line forms shared by commands.
//!
//! Text that came from elsewhere (the service, a delivery, a subscriber's answer) is printed
//! through [`Escaped`] in text output, so that a control character in it shows as an escape
//! instead of moving the cursor or rewriting the line; JSON output is escaped by its encoder.

use serde::Serialize;

use super::CliError;
use crate::model::text::Escaped;
use crate::model::{RegistrationCheck, SubscriberView};

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
