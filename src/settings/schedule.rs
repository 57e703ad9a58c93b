//! `[reconcile] schedule`: a cron expression with seconds, parsed when the settings are
//! validated (with the parser the scheduler uses, configured as it configures it).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The reconciler's schedule as configured; empty disables it.
#[derive(Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Schedule(String);

impl Schedule {
    /// No scheduled passes.
    pub fn disabled() -> Self {
        Self(String::new())
    }

    pub fn is_disabled(&self) -> bool {
        self.0.trim().is_empty()
    }

    /// The expression, as the scheduler takes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the expression parses as the scheduler parses it: seconds required, and a
    /// day of month and a day of week both counting (`dom_and_dow`).
    pub fn check(&self) -> Result<(), croner::errors::CronError> {
        if self.is_disabled() {
            return Ok(());
        }
        croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Required)
            .dom_and_dow(true)
            .build()
            .parse(&self.0)
            .map(drop)
    }
}

impl From<&str> for Schedule {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl From<String> for Schedule {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::Schedule;

    #[test]
    fn a_schedule_needs_its_seconds_and_empty_disables_it() {
        assert!(Schedule::from("0 */15 * * * *").check().is_ok());
        assert!(Schedule::from("*/15 * * * *").check().is_err());
        assert!(Schedule::from("every hour").check().is_err());
        assert!(Schedule::disabled().check().is_ok());
        assert!(Schedule::from("  ").is_disabled());
    }
}
