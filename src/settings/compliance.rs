//! `[compliance]`: the legal deadline of an opt-out in business days, and the confirmation
//! text allowed after one.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::SettingsError;
use crate::model::business_days::BusinessDays;

/// Most business days a deadline may be set to: a quarter of a year.
const MOST_DAYS: u32 = 65;
/// Longest confirmation window: a day.
const MOST_WINDOW_SECS: u64 = 24 * 60 * 60;

/// `[compliance]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComplianceSettings {
    /// An opt-out is honoured within this many business days (FCC: 10).
    pub deadline_business_days: u32,
    /// Business days are counted in this zone (IANA name).
    pub timezone: String,
    /// `YYYY-MM-DD` days closed beside the US federal holidays.
    pub extra_holidays: Vec<String>,
    /// One confirmation message is allowed within this long after an opt-out.
    pub confirmation_window_secs: u64,
}

impl Default for ComplianceSettings {
    fn default() -> Self {
        Self {
            deadline_business_days: 10,
            timezone: "America/New_York".into(),
            extra_holidays: Vec::new(),
            confirmation_window_secs: 300,
        }
    }
}

impl ComplianceSettings {
    /// The calendar the deadlines are counted on; an error names the key at fault.
    pub fn business_days(&self) -> Result<BusinessDays, SettingsError> {
        if !(1..=MOST_DAYS).contains(&self.deadline_business_days) {
            return Err(SettingsError::invalid(
                "compliance.deadline_business_days",
                format!("must be 1 to {MOST_DAYS} (the FCC's is 10)"),
            ));
        }
        let timezone = self.timezone.parse().map_err(|_| {
            SettingsError::invalid(
                "compliance.timezone",
                "must be an IANA time zone name, e.g. America/New_York",
            )
        })?;
        let holidays = self
            .extra_holidays
            .iter()
            .map(|day| {
                NaiveDate::parse_from_str(day, "%Y-%m-%d").map_err(|_| {
                    SettingsError::invalid(
                        "compliance.extra_holidays",
                        format!("{day:?} is not a YYYY-MM-DD date"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BusinessDays::new(
            self.deadline_business_days,
            timezone,
            holidays,
        ))
    }

    /// Checks every key of the section.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.business_days()?;
        if self.confirmation_window_secs > MOST_WINDOW_SECS {
            return Err(SettingsError::invalid(
                "compliance.confirmation_window_secs",
                format!("must be at most {MOST_WINDOW_SECS} (a day; the FCC allows 5 minutes)"),
            ));
        }
        Ok(())
    }
}
