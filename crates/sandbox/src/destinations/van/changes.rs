//! The change log a committee's changed-entity export jobs read: every change to a phone's
//! opt-in status and every canvass response, with when and by whom, plus bulk-seeded changes
//! kept as arithmetic (a range of rows, never one struct per row) so that 100,000 of them cost
//! nothing until a file is served.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// Who made a change: an application through the API (with the committee's key: the fake
/// has one key per committee, so every API change is "self" to that key), or a user of
/// VAN's own screens (a phone banker, a canvasser, another tool's staff).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum VanChangedBy {
    /// The API, with the committee's key; `application` is the Basic user name.
    Api { application: String },
    /// A person in VAN's interface.
    User { name: String },
}

/// What changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum VanChangeKind {
    /// A phone's opt-in status became `status` (`I`, `U` or `O`): resource `Contacts`.
    #[serde(rename_all = "camelCase")]
    PhoneOptInStatus { status: String },
    /// A canvass response with a result code: resource `ContactHistory`.
    #[serde(rename_all = "camelCase")]
    CanvassResponse {
        contacts_contact_id: u64,
        result_code_id: u32,
        contact_type_id: Option<u32>,
        input_type_id: Option<i64>,
        /// As the response gave it, else the change time.
        date_canvassed: String,
    },
}

/// One change of a committee's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanChange {
    pub van_id: u64,
    /// The phone concerned (a canvass response without a phone has none).
    pub dialing_prefix: Option<String>,
    pub phone_number: Option<String>,
    pub what: VanChangeKind,
    pub at: DateTime<Utc>,
    pub by: VanChangedBy,
}

/// Which export resource a change shows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    Contacts,
    ContactHistory,
}

impl Resource {
    pub(crate) fn of(change: &VanChange) -> Self {
        match change.what {
            VanChangeKind::PhoneOptInStatus { .. } => Self::Contacts,
            VanChangeKind::CanvassResponse { .. } => Self::ContactHistory,
        }
    }
}

/// Changes seeded in bulk: row `i` of `count` is VAN ID `first_van_id + i`, number
/// `first_number + i`, at `start + i * step`, made by the user "Seeded phone banker".
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    pub first_van_id: u64,
    pub first_number: u64,
    pub count: u64,
    pub start: DateTime<Utc>,
    pub step: Duration,
    /// `Contacts`: opt-in status `O`; `ContactHistory`: a canvass response of this result.
    pub resource: Resource,
    pub result_code_id: u32,
}

/// The user seeded changes are made by.
pub(crate) const SEED_USER: &str = "Seeded phone banker";

impl Seed {
    /// Row `i` as a change.
    pub(crate) fn row(&self, i: u64) -> VanChange {
        let at = self.start + self.step * i32::try_from(i).unwrap_or(i32::MAX);
        let what = match self.resource {
            Resource::Contacts => VanChangeKind::PhoneOptInStatus { status: "O".into() },
            Resource::ContactHistory => VanChangeKind::CanvassResponse {
                contacts_contact_id: 900_000_000 + self.first_van_id % 1_000_000 + i,
                result_code_id: self.result_code_id,
                contact_type_id: None,
                input_type_id: Some(11),
                date_canvassed: timestamp(at),
            },
        };
        VanChange {
            van_id: self.first_van_id + i,
            dialing_prefix: Some("1".into()),
            phone_number: Some((self.first_number + i).to_string()),
            what,
            at,
            by: VanChangedBy::User {
                name: SEED_USER.into(),
            },
        }
    }

    /// The rows whose time is in `[from, to)`, as an index range.
    pub(crate) fn within(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (u64, u64) {
        let step = self.step.num_milliseconds().max(1);
        let index_at = |t: DateTime<Utc>| -> u64 {
            let ms = (t - self.start).num_milliseconds();
            if ms <= 0 {
                0
            } else {
                // The first row at or after `t`.
                u64::try_from((ms + step - 1) / step).unwrap_or(u64::MAX)
            }
        };
        let lo = index_at(from).min(self.count);
        let hi = index_at(to).min(self.count);
        (lo, hi.max(lo))
    }
}

/// Now, to the millisecond the export files write: what the log keeps is what they show.
pub(crate) fn now_ms() -> DateTime<Utc> {
    use chrono::SubsecRound as _;
    Utc::now().trunc_subsecs(3)
}

/// A change time as the export files and the truth write it: RFC 3339, UTC, milliseconds.
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_finds_the_rows_of_a_window_by_arithmetic() {
        let start = Utc::now();
        let seed = Seed {
            first_van_id: 1,
            first_number: 2_012_000_000,
            count: 100_000,
            start,
            step: Duration::milliseconds(10),
            resource: Resource::Contacts,
            result_code_id: 0,
        };
        assert_eq!(
            seed.within(start - Duration::days(1), start + Duration::days(1)),
            (0, 100_000)
        );
        let (lo, hi) = seed.within(
            start + Duration::milliseconds(100),
            start + Duration::milliseconds(200),
        );
        assert_eq!((lo, hi), (10, 20));
        assert_eq!(seed.row(10).at, start + Duration::milliseconds(100));
        assert_eq!(seed.row(3).phone_number.as_deref(), Some("2012000003"));
    }
}
