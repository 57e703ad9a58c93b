//! The read side's state changes: changes appended to a committee's log (by the API's
//! handlers, or by a user of VAN's screens played through the controls), bulk seeds, the
//! export jobs and their files, and the download log.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::changes::{
    Resource, SEED_USER, Seed, VanChange, VanChangeKind, VanChangedBy, now_ms, timestamp,
};
use super::export::ExportJob;
use super::files::{FilePlan, Refusal, VanDownload, VanDownloadCredential};
use super::{Van, VanCanvassPhone, VanCanvassResponse, VanExportSettings, VanPhone, split_phone};

/// Entries kept in the download logs: the most recent.
const DOWNLOADS_KEPT: usize = 10_000;

/// The person a user marks: by VAN ID, or by phone number (E.164; a person is made when
/// nobody has it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VanTarget {
    VanId(u64),
    PhoneNumber(String),
}

/// What a user does in VAN's screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VanMark {
    /// A canvass response with the result code "Do Not Text" (resource `ContactHistory`).
    DoNotText,
    /// The phone's opt-in status set to `O` (resource `Contacts`).
    OptOut,
    /// The phone's opt-in status set to `I`.
    OptIn,
}

/// The result code a user marks with.
const DO_NOT_TEXT: &str = "Do Not Text";
/// The contact type of a phone banker's call.
const PHONE: &str = "Phone";
/// The input type of a user's entry (not the API's 11).
const USER_INPUT_TYPE: i64 = 2;

impl Van {
    pub(crate) fn next_job_id(&mut self) -> u64 {
        let id = self.next_job_id;
        self.next_job_id += 1;
        id
    }

    pub(crate) fn add_job(&mut self, job: ExportJob) {
        for (k, file) in job.files.iter().enumerate() {
            self.files.insert(file.token.clone(), (job.id, k));
        }
        self.jobs.insert(job.id, job);
    }

    /// What serving the file of `token` takes, at `now`.
    pub(crate) fn file_plan(&self, token: &str, now: DateTime<Utc>) -> Result<FilePlan, Refusal> {
        let (job_id, k) = self.files.get(token).ok_or(Refusal::Unknown)?;
        let job = self.jobs.get(job_id).ok_or(Refusal::Unknown)?;
        let file = job.files.get(*k).ok_or(Refusal::Unknown)?;
        if file.expires <= now {
            return Err(Refusal::Expired(file.expires));
        }
        let (explicit, seeded) = job.rows_of(file);
        let missing = job.settings.missing_column.as_deref();
        Ok(FilePlan {
            resource: job.resource,
            columns: job
                .columns
                .iter()
                .copied()
                .filter(|c| missing.is_none_or(|m| !m.eq_ignore_ascii_case(c)))
                .collect(),
            committee_id: self.committees[job.committee].id,
            explicit,
            seeded,
            garbage_row: job.settings.garbage_row,
            huge: job.settings.huge_file,
            future_by: job.settings.future_by_secs.map(chrono::Duration::seconds),
            national_numbers: job.settings.national_numbers,
            trickle: job
                .settings
                .trickle_ms
                .map(std::time::Duration::from_millis),
            redirect_to: job.settings.redirect_downloads_to.clone(),
        })
    }

    pub(crate) fn record_download(
        &mut self,
        path: &str,
        status: u16,
        seen: Vec<VanDownloadCredential>,
    ) {
        if self.downloads.len() >= DOWNLOADS_KEPT {
            self.downloads.remove(0);
        }
        self.downloads.push(VanDownload {
            path: path.to_owned(),
            status,
            credentials: seen.len(),
        });
        let room = DOWNLOADS_KEPT.saturating_sub(self.credentials_seen.len());
        self.credentials_seen.extend(seen.into_iter().take(room));
    }

    /// Appends a change made through the API by `application` with the committee's key.
    pub(crate) fn record_api_change(
        &mut self,
        committee: usize,
        application: &str,
        van_id: u64,
        phone: Option<(String, String)>,
        what: VanChangeKind,
    ) {
        let (dialing_prefix, phone_number) = phone.unzip();
        self.committees[committee].changes.push(VanChange {
            van_id,
            dialing_prefix,
            phone_number,
            what,
            at: now_ms(),
            by: VanChangedBy::Api {
                application: application.to_owned(),
            },
        });
    }

    pub(crate) fn next_contacts_contact_id(&mut self) -> u64 {
        let id = self.next_contacts_contact_id;
        self.next_contacts_contact_id += 1;
        id
    }

    /// The person and phone a target names (prefix and national number).
    fn resolve(&mut self, target: &VanTarget) -> Result<(u64, String, String), String> {
        match target {
            VanTarget::VanId(van_id) => {
                let person = self
                    .people
                    .get(van_id)
                    .ok_or_else(|| format!("no person has VAN ID {van_id}"))?;
                let phone = person
                    .phones
                    .first()
                    .ok_or_else(|| format!("person {van_id} has no phone"))?;
                Ok((
                    *van_id,
                    phone.dialing_prefix.clone(),
                    phone.phone_number.clone(),
                ))
            }
            VanTarget::PhoneNumber(raw) => {
                let (prefix, national) = split_phone(raw);
                let found = self.people.values().find(|p| {
                    p.phones
                        .iter()
                        .any(|q| q.phone_number == national && q.dialing_prefix == prefix)
                });
                let van_id = match found {
                    Some(p) => p.van_id,
                    None => self.add_person(None, raw),
                };
                Ok((van_id, prefix, national))
            }
        }
    }

    /// A user of the committee of `api_key` marks the target; returns the change logged.
    pub(crate) fn mark(
        &mut self,
        api_key: &str,
        target: &VanTarget,
        mark: VanMark,
        user: &str,
    ) -> Result<VanChange, String> {
        let committee = self
            .committee_of(api_key)
            .ok_or_else(|| "no committee has this key".to_owned())?;
        let (van_id, prefix, national) = self.resolve(target)?;
        let at = now_ms();
        let what = match mark {
            VanMark::DoNotText => self.user_canvass(committee, van_id, &prefix, &national, at)?,
            VanMark::OptOut | VanMark::OptIn => {
                let status = if mark == VanMark::OptIn { "I" } else { "O" };
                self.set_status(van_id, &prefix, &national, status);
                VanChangeKind::PhoneOptInStatus {
                    status: status.into(),
                }
            }
        };
        let change = VanChange {
            van_id,
            dialing_prefix: Some(prefix),
            phone_number: Some(national),
            what,
            at,
            by: VanChangedBy::User {
                name: user.to_owned(),
            },
        };
        self.committees[committee].changes.push(change.clone());
        Ok(change)
    }

    /// Records a "Do Not Text" canvass response by phone, as a user enters it.
    fn user_canvass(
        &mut self,
        committee: usize,
        van_id: u64,
        prefix: &str,
        national: &str,
        at: DateTime<Utc>,
    ) -> Result<VanChangeKind, String> {
        let c = &self.committees[committee];
        let result_code_id = c
            .result_codes
            .iter()
            .find(|r| r.name == DO_NOT_TEXT)
            .map(|r| r.result_code_id)
            .ok_or_else(|| format!("the committee has no result code {DO_NOT_TEXT:?}"))?;
        let contact_type_id = c
            .contact_types()
            .iter()
            .find(|t| t.name == PHONE)
            .map(|t| t.contact_type_id);
        let (committee_id, name) = (c.id, c.name.clone());
        self.canvass_responses.push(VanCanvassResponse {
            van_id,
            committee_id,
            committee: name,
            database_mode: 1,
            result_code_id: Some(result_code_id),
            contact_type_id,
            input_type_id: Some(USER_INPUT_TYPE),
            phone: Some(VanCanvassPhone {
                dialing_prefix: Some(prefix.to_owned()),
                phone_number: national.to_owned(),
            }),
            date_canvassed: Some(timestamp(at)),
            responses: 0,
            at: timestamp(at),
        });
        Ok(VanChangeKind::CanvassResponse {
            contacts_contact_id: self.next_contacts_contact_id(),
            result_code_id,
            contact_type_id,
            input_type_id: Some(USER_INPUT_TYPE),
            date_canvassed: timestamp(at),
        })
    }

    fn set_status(&mut self, van_id: u64, prefix: &str, national: &str, status: &str) {
        let Some(person) = self.people.get_mut(&van_id) else {
            return;
        };
        match person
            .phones
            .iter_mut()
            .find(|p| p.phone_number == national && p.dialing_prefix == prefix)
        {
            Some(phone) => phone.phone_opt_in_status = Some(status.into()),
            None => person.phones.push(VanPhone {
                dialing_prefix: prefix.to_owned(),
                phone_number: national.to_owned(),
                phone_type: Some("C".into()),
                phone_opt_in_status: Some(status.into()),
            }),
        }
    }

    /// `count` changes by a user, spread evenly over the last hour, kept as one range: phone
    /// opt-outs (`Contacts`) or "Do Not Text" canvass responses (`ContactHistory`).
    pub(crate) fn seed(&mut self, api_key: &str, count: u64, do_not_text: bool) -> Option<u64> {
        let committee = self.committee_of(api_key)?;
        let c = &self.committees[committee];
        let result_code_id = c
            .result_codes
            .iter()
            .find(|r| r.name == DO_NOT_TEXT)
            .map_or(0, |r| r.result_code_id);
        let span = Duration::hours(1);
        let step = Duration::milliseconds((span.num_milliseconds() / count.max(1) as i64).max(1));
        let (first_van_id, first_number) = self.next_seed;
        self.next_seed = (first_van_id + count, first_number + count);
        let seed = Seed {
            first_van_id,
            first_number,
            count,
            start: Utc::now() - span,
            step,
            resource: if do_not_text {
                Resource::ContactHistory
            } else {
                Resource::Contacts
            },
            result_code_id,
        };
        self.committees[committee].seeds.push(seed);
        tracing::debug!(count, user = SEED_USER, "sandbox: VAN changes seeded");
        Some(first_van_id)
    }

    pub(crate) fn set_export(&mut self, api_key: &str, settings: VanExportSettings) -> bool {
        match self.committee_of(api_key) {
            Some(i) => {
                self.committees[i].export = settings;
                true
            }
            None => false,
        }
    }
}
