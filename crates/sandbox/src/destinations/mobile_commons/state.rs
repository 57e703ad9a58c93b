//! The Mobile Commons fake's state: its profiles made, listed, opted out.

use chrono::{DateTime, Utc};

use super::*;

impl MobileCommons {
    /// One profile per number of `leads` (the first lead's name, email and postal code),
    /// `Active Subscriber`, made and updated at `at`.
    pub(crate) fn new(
        username: String,
        password: String,
        leads: &[Lead],
        at: DateTime<Utc>,
    ) -> Self {
        let mut fake = Self {
            username,
            password,
            profiles: Vec::new(),
            by_number: HashMap::new(),
            next_id: FIRST_PROFILE_ID,
            opt_out_calls: Vec::new(),
            listings_served: 0,
            endless: false,
            token: String::new(),
        };
        for lead in leads {
            let Some(number) = digits(&lead.phone_number) else {
                continue;
            };
            if fake.by_number.contains_key(&number) {
                continue;
            }
            let profile = fake.make(number, ACTIVE_SUBSCRIBER, at);
            profile.first_name = lead.first_name.clone().unwrap_or_default();
            profile.last_name = lead.last_name.clone().unwrap_or_default();
            profile.email = lead.email.clone().unwrap_or_default();
            profile.postal_code = lead.postal_code.clone().unwrap_or_default();
        }
        fake
    }

    /// The fake, taking `token` as `Authorization: Bearer` too (empty: no token).
    pub(crate) fn with_token(mut self, token: String) -> Self {
        self.token = token;
        self
    }

    /// A new profile with `number` as written, `status`, made and updated at `at`, with its
    /// subscription to the campaign (`Active` unless the status is [`TEXTED_STOP`]).
    pub(super) fn make(
        &mut self,
        number: String,
        status: &str,
        at: DateTime<Utc>,
    ) -> &mut MobileCommonsProfile {
        let id = self.next_id;
        self.next_id += 1;
        let stopped = status == TEXTED_STOP;
        let subscription = MobileCommonsSubscription {
            id: id + SUBSCRIPTION_ID_OFFSET,
            campaign_id: MOBILE_COMMONS_CAMPAIGN_ID,
            campaign_name: CAMPAIGN_NAME.into(),
            opt_in_path_id: OPT_IN_PATH_ID,
            status: if stopped {
                SUBSCRIPTION_OPTED_OUT
            } else {
                SUBSCRIPTION_ACTIVE
            }
            .into(),
            opt_in_source: "Sandbox".into(),
            created_at: at,
            activated_at: at,
            opted_out_at: stopped.then_some(at),
            opt_out_source: stopped.then(|| TEXTED_STOP.to_owned()),
        };
        if let Some(key) = digits(&number) {
            self.by_number.entry(key).or_insert(self.profiles.len());
        }
        self.profiles.push(MobileCommonsProfile {
            id,
            first_name: String::new(),
            last_name: String::new(),
            phone_number: number,
            email: String::new(),
            status: status.to_owned(),
            created_at: at,
            updated_at: at,
            opted_out_at: stopped.then_some(at),
            opted_out_source: stopped.then(|| TEXTED_STOP.to_owned()),
            source_type: "API".into(),
            source_name: "Sandbox".into(),
            postal_code: String::new(),
            subscriptions: vec![subscription],
        });
        let last = self.profiles.len() - 1;
        &mut self.profiles[last]
    }

    /// `count` profiles opted out by texting STOP, one number each (`1312600NNNN` on), made
    /// and updated at `at`: a listing as large as a campaign's.
    pub(crate) fn seed(&mut self, count: u64, at: DateTime<Utc>) {
        let first = 13_126_000_000 + self.profiles.len() as u64;
        for n in 0..count {
            self.make((first + n).to_string(), TEXTED_STOP, at);
        }
    }

    /// The profile holding this number (however either is written).
    pub(super) fn find(&self, raw: &str) -> Option<usize> {
        self.by_number.get(&digits(raw)?).copied()
    }

    /// Everything it holds, with the request counts of its switchboard.
    pub(crate) fn truth(&self, requests: FakeRequestCounts) -> MobileCommonsTruth {
        MobileCommonsTruth {
            profiles: self.profiles.clone(),
            opt_out_calls: self.opt_out_calls.clone(),
            listings_served: self.listings_served,
            endless: self.endless,
            requests,
        }
    }

    /// Profile listings answered with `success="true"`.
    pub(crate) fn listings_served(&self) -> u64 {
        self.listings_served
    }
}
