//! The VAN fake, one folder: its state here (committees, one per API key, each with lists of
//! its own ids and its change log; people and their phones; the canvass responses recorded;
//! the export jobs and their files), its API in `api.rs`, `people.rs` and `export_api.rs`,
//! what their handlers share in `wire.rs`. The changed-entity export (the read side) is
//! `changes.rs` (the log), `catalog.rs` (resources, fields, columns), `export.rs` (a job),
//! `files.rs` (the download path) and `sources.rs` (what a user does in VAN's screens).

mod api;
mod catalog;
mod changes;
mod control;
mod export;
mod export_api;
mod files;
mod people;
mod sources;
mod sources_control;
mod wire;

pub(crate) use api::{auth, no_such_endpoint, routes};
pub use changes::{VanChange, VanChangeKind, VanChangedBy};
pub(crate) use control::routes as control_routes;
pub use export::{HUGE_FILE_BYTES, VanExportJobTruth, VanExportSettings};
pub(crate) use files::download;
pub use files::{VanDownload, VanDownloadCredential};
pub use sources::{VanMark, VanTarget};
pub(crate) use wire::VanError;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::faults::FakeRequestCounts;
use crate::config::VanCommittee;

/// The custom field of the service's leads that holds the VAN ID.
pub(crate) const VAN_ID_FIELD: &str = "VanID";

/// The VAN ID of the seeded lead at `index` (in creation order), if it has one: about ten
/// leads in eleven do. Derived from the index alone, so seeding draws nothing from the
/// world's generator.
pub(crate) fn van_id_for_lead(index: usize) -> Option<u64> {
    let index = u64::try_from(index).ok()?;
    (index % 11 != 5).then(|| 100_000_101 + index * 37)
}

/// A result code, as `GET /canvassResponses/resultCodes` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanResultCode {
    pub result_code_id: u32,
    pub name: String,
    pub short_name: String,
    pub medium_name: String,
}

/// A contact type, as `GET /canvassResponses/contactTypes` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanContactType {
    pub contact_type_id: u32,
    pub name: String,
    pub channel_type_name: String,
}

/// Result codes every committee has: name, short name, medium name. The ids differ per
/// committee, as in VAN, and are none of VAN's common defaults.
const RESULT_CODES: [(&str, &str, &str); 9] = [
    ("Not Home", "NH", "Not Home"),
    ("Refused", "R", "Refused"),
    ("Moved", "MV", "Moved"),
    ("Deceased", "D", "Deceased"),
    ("Wrong Number", "WN", "Wrong #"),
    ("Disconnected", "DIS", "Disconn."),
    ("Do Not Call", "DNC", "No Call"),
    ("Do Not Text", "DNT", "No Text"),
    ("Canvassed", "C", "Canvassed"),
];

/// Contact types: name and channel. "SMS Text" can be taken away per committee.
const CONTACT_TYPES: [(&str, &str); 6] = [
    ("Phone", "Phone"),
    ("Walk", "Walk"),
    ("Mail", "Mail"),
    ("Email", "Email"),
    ("SMS Text", "SMS"),
    ("Auto Dial", "Phone"),
];

/// The contact type a committee can lack.
pub(crate) const SMS_TEXT: &str = "SMS Text";

/// The channel whose contact types need a phone.
pub(crate) const SMS_CHANNEL: &str = "SMS";

pub(crate) struct Committee {
    pub id: u32,
    pub name: String,
    api_key: String,
    pub sms_text: bool,
    /// Every request with this key is answered with this status (401 or 403).
    pub revoked: Option<u16>,
    pub result_codes: Vec<VanResultCode>,
    all_contact_types: Vec<VanContactType>,
    /// What its export jobs read: the changes made, and those seeded in bulk.
    pub changes: Vec<changes::VanChange>,
    pub seeds: Vec<changes::Seed>,
    pub export: VanExportSettings,
}

impl Committee {
    fn new(index: usize, config: &VanCommittee) -> Self {
        let i = u32::try_from(index).unwrap_or(u32::MAX / 4096) % 64;
        // Ids interleaved differently per committee, so no name has the same id twice.
        let result_codes = RESULT_CODES
            .iter()
            .enumerate()
            .map(|(k, (name, short, medium))| {
                let slot = (k as u32 + 3 * i) % RESULT_CODES.len() as u32;
                VanResultCode {
                    result_code_id: 4_003 + 1_000 * i + 17 * slot,
                    name: (*name).into(),
                    short_name: (*short).into(),
                    medium_name: (*medium).into(),
                }
            })
            .collect();
        let all_contact_types = CONTACT_TYPES
            .iter()
            .enumerate()
            .map(|(k, (name, channel))| {
                let slot = (k as u32 + 2 * i) % CONTACT_TYPES.len() as u32;
                VanContactType {
                    contact_type_id: 205 + 100 * i + 11 * slot,
                    name: (*name).into(),
                    channel_type_name: (*channel).into(),
                }
            })
            .collect();
        Self {
            id: 70_011 + 1_010 * i,
            name: config.name.clone(),
            api_key: config.api_key.clone(),
            sms_text: config.sms_text,
            revoked: None,
            result_codes,
            all_contact_types,
            changes: Vec::new(),
            seeds: Vec::new(),
            export: VanExportSettings::default(),
        }
    }

    /// The contact types this committee lists (without "SMS Text" when it lacks it).
    pub(crate) fn contact_types(&self) -> Vec<VanContactType> {
        self.all_contact_types
            .iter()
            .filter(|t| self.sms_text || t.name != SMS_TEXT)
            .cloned()
            .collect()
    }

    fn truth(&self) -> VanCommitteeTruth {
        VanCommitteeTruth {
            committee_id: self.id,
            name: self.name.clone(),
            result_codes: self.result_codes.clone(),
            contact_types: self.contact_types(),
            revoked: self.revoked,
            changes: self.changes.clone(),
            seeded_changes: self.seeds.iter().map(|s| s.count).sum(),
            export: self.export.clone(),
        }
    }
}

/// A committee as the truth shows it (never its key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanCommitteeTruth {
    pub committee_id: u32,
    pub name: String,
    pub result_codes: Vec<VanResultCode>,
    pub contact_types: Vec<VanContactType>,
    pub revoked: Option<u16>,
    /// Its change log (the seeded changes only counted).
    pub changes: Vec<VanChange>,
    pub seeded_changes: u64,
    pub export: VanExportSettings,
}

/// A phone of a VAN person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanPhone {
    pub dialing_prefix: String,
    /// The national number, digits only.
    pub phone_number: String,
    pub phone_type: Option<String>,
    /// `I`, `O` or `U`; none until set.
    pub phone_opt_in_status: Option<String>,
}

/// A VAN person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanPerson {
    pub van_id: u64,
    /// The seeded lead this person stands for, if any.
    pub lead_id: Option<String>,
    pub phones: Vec<VanPhone>,
}

/// The phone of a canvass response's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanCanvassPhone {
    pub dialing_prefix: Option<String>,
    pub phone_number: String,
}

/// A canvass response VAN accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanCanvassResponse {
    pub van_id: u64,
    pub committee_id: u32,
    pub committee: String,
    /// The mode of the key it came with: 0 MyVoters, 1 MyCampaign.
    pub database_mode: u8,
    pub result_code_id: Option<u32>,
    pub contact_type_id: Option<u32>,
    pub input_type_id: Option<i64>,
    pub phone: Option<VanCanvassPhone>,
    pub date_canvassed: Option<String>,
    /// How many script responses came with it.
    pub responses: usize,
    /// When the fake recorded it (RFC 3339).
    pub at: String,
}

/// Everything the VAN fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanTruth {
    pub committees: Vec<VanCommitteeTruth>,
    pub people: Vec<VanPerson>,
    pub canvass_responses: Vec<VanCanvassResponse>,
    pub requests: FakeRequestCounts,
    pub export_jobs: Vec<VanExportJobTruth>,
    /// Every request to the download path (`/van-files/...`), oldest first.
    pub downloads: Vec<VanDownload>,
    /// Every credential a request to the download path carried: none should.
    pub download_credentials_seen: Vec<VanDownloadCredential>,
}

/// A number split as VAN keeps it: dialing prefix and national number. An E.164 number
/// (`+44 20 7183 8750`) splits at its country code; digits alone are a number under VAN's
/// default prefix, `1` (eleven digits starting with `1` drop it).
pub(crate) fn split_phone(phone: &str) -> (String, String) {
    if phone.trim_start().starts_with('+')
        && let Ok(number) = phonenumber::parse(None, phone)
    {
        return (
            number.code().value().to_string(),
            number.national().to_string(),
        );
    }
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    match digits.strip_prefix('1') {
        Some(national) if digits.len() == 11 => ("1".into(), national.to_owned()),
        _ => ("1".into(), digits),
    }
}

/// The national number of what a client sent (digits, a leading `1` of eleven dropped).
pub(crate) fn national(phone: &str) -> String {
    split_phone(phone).1
}

pub(crate) struct Van {
    pub committees: Vec<Committee>,
    pub people: BTreeMap<u64, VanPerson>,
    pub canvass_responses: Vec<VanCanvassResponse>,
    next_van_id: u64,
    /// The export jobs of every committee, and their files by token.
    pub jobs: BTreeMap<u64, export::ExportJob>,
    files: HashMap<String, (u64, usize)>,
    next_job_id: u64,
    next_contacts_contact_id: u64,
    next_seed: (u64, u64),
    downloads: Vec<VanDownload>,
    credentials_seen: Vec<VanDownloadCredential>,
}

impl Van {
    pub(crate) fn new(committees: &[VanCommittee], people: &[(u64, String, String)]) -> Self {
        let mut van = Self {
            committees: committees
                .iter()
                .enumerate()
                .map(|(i, c)| Committee::new(i, c))
                .collect(),
            people: BTreeMap::new(),
            canvass_responses: Vec::new(),
            next_van_id: 200_000_001,
            jobs: BTreeMap::new(),
            files: HashMap::new(),
            next_job_id: 2_170_181_229,
            next_contacts_contact_id: 31_000_001,
            next_seed: (300_000_001, 2_012_000_000),
            downloads: Vec::new(),
            credentials_seen: Vec::new(),
        };
        for (van_id, lead_id, phone) in people {
            van.insert_person(*van_id, Some(lead_id.clone()), phone);
        }
        van
    }

    fn insert_person(&mut self, van_id: u64, lead_id: Option<String>, phone: &str) {
        let (dialing_prefix, phone_number) = split_phone(phone);
        self.people.insert(
            van_id,
            VanPerson {
                van_id,
                lead_id,
                phones: vec![VanPhone {
                    dialing_prefix,
                    phone_number,
                    phone_type: Some("C".into()),
                    phone_opt_in_status: None,
                }],
            },
        );
    }

    pub(crate) fn add_person(&mut self, lead_id: Option<String>, phone: &str) -> u64 {
        let van_id = self.next_van_id;
        self.next_van_id += 1;
        self.insert_person(van_id, lead_id, phone);
        van_id
    }

    /// The committee of a key, by its position.
    pub(crate) fn committee_of(&self, api_key: &str) -> Option<usize> {
        self.committees.iter().position(|c| c.api_key == api_key)
    }

    pub(crate) fn revoke(&mut self, api_key: &str, status: Option<u16>) -> bool {
        match self.committee_of(api_key) {
            Some(i) => {
                self.committees[i].revoked = status;
                true
            }
            None => false,
        }
    }

    pub(crate) fn set_sms_text(&mut self, api_key: &str, present: bool) -> bool {
        match self.committee_of(api_key) {
            Some(i) => {
                self.committees[i].sms_text = present;
                true
            }
            None => false,
        }
    }

    pub(crate) fn truth(&self, requests: FakeRequestCounts) -> VanTruth {
        VanTruth {
            committees: self.committees.iter().map(Committee::truth).collect(),
            people: self.people.values().cloned().collect(),
            canvass_responses: self.canvass_responses.clone(),
            requests,
            export_jobs: self
                .jobs
                .values()
                .map(|j| j.truth(self.committees[j.committee].id))
                .collect(),
            downloads: self.downloads.clone(),
            download_credentials_seen: self.credentials_seen.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_one_lead_in_eleven_has_no_van_id_and_the_ids_are_distinct() {
        let ids: Vec<Option<u64>> = (0..110).map(van_id_for_lead).collect();
        assert_eq!(ids.iter().filter(|id| id.is_none()).count(), 10);
        let mut some: Vec<u64> = ids.into_iter().flatten().collect();
        some.dedup();
        assert_eq!(some.len(), 100);
    }

    #[test]
    fn a_number_splits_into_country_code_and_national_number() {
        assert_eq!(
            split_phone("+12025550143"),
            ("1".to_owned(), "2025550143".to_owned())
        );
        assert_eq!(
            split_phone("+442071838750"),
            ("44".to_owned(), "2071838750".to_owned())
        );
        assert_eq!(national("2025550143"), "2025550143");
        assert_eq!(national("12025550143"), "2025550143");
    }
}
