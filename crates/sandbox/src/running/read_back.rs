//! The fakes of the systems a source reads back, as a test drives them: Mobilize's people
//! and Mobile Commons' profiles.

use super::RunningSandbox;
use crate::destinations::{MobileCommonsProfile, MobilizePerson};
use crate::{MobileCommonsTruth, MobilizeTruth};

impl RunningSandbox {
    /// The fake Mobilize's base URL (`.../mobilize/v1`), as a source's API root.
    pub fn mobilize_url(&self) -> String {
        format!("http://{}/mobilize/v1", self.addr)
    }

    /// Everything the fake Mobilize holds: its people, listings served, request counts.
    pub fn mobilize_truth(&self) -> MobilizeTruth {
        self.fakes.mobilize_truth()
    }

    /// How many people listings the fake Mobilize answered 200.
    pub fn mobilize_listings_served(&self) -> u64 {
        self.fakes.mobilize_listings_served()
    }

    /// A supporter opts out of texts on Mobilize (`OPT_OUT`, `modified_date` now; a person is
    /// made when nobody has the number). The person, and whether it was made; `None` if
    /// `phone` is not a number.
    pub fn mobilize_opt_out(&self, phone: &str) -> Option<(MobilizePerson, bool)> {
        self.fakes.mobilize_opt_out(phone)
    }

    /// `count` more people on Mobilize, each opted out of texts, one number each
    /// (`+1312500NNNN` on), modified now: a listing as large as a campaign's.
    pub fn mobilize_seed(&self, count: u64) {
        self.fakes.mobilize_seed(count);
    }

    /// Hostile: the first page of Mobilize's people listing gives `href` as its `next`
    /// link, exactly as given (`None`: its own links again).
    pub fn mobilize_next_href(&self, href: Option<&str>) {
        self.fakes.mobilize_next_href(href.map(str::to_owned));
    }

    /// Hostile: a Mobilize person with one number written as `number` (`4155550100`),
    /// `status`, and `modified_date` (Unix seconds; one in 2100), as given.
    pub fn mobilize_add_person(
        &self,
        number: &str,
        status: &str,
        modified_date: i64,
    ) -> MobilizePerson {
        self.fakes
            .mobilize_add_person(number, status, modified_date)
    }

    /// The fake Mobile Commons' API root (`.../mobile_commons/api`): `{root}/profiles`,
    /// `{root}/profile_opt_out`.
    pub fn mobile_commons_url(&self) -> String {
        format!("http://{}/mobile_commons/api", self.addr)
    }

    /// Everything the fake Mobile Commons holds: its profiles, the `profile_opt_out` calls it
    /// received, listings served, request counts.
    pub fn mobile_commons_truth(&self) -> MobileCommonsTruth {
        self.fakes.mobile_commons_truth()
    }

    /// How many profile listings the fake Mobile Commons answered with `success="true"`.
    pub fn mobile_commons_listings_served(&self) -> u64 {
        self.fakes.mobile_commons_listings_served()
    }

    /// A person texts STOP to the Mobile Commons campaign (`Texted a STOP word`,
    /// `opted_out_at` and `updated_at` now; a profile is made when nobody has the number).
    /// The profile, and whether it was made; `None` if `phone` is not a number.
    pub fn mobile_commons_stop(&self, phone: &str) -> Option<(MobileCommonsProfile, bool)> {
        self.fakes.mobile_commons_stop(phone)
    }

    /// `count` more profiles on Mobile Commons, each opted out by STOP, one number each
    /// (`1312600NNNN` on), updated now: a listing as large as a campaign's.
    pub fn mobile_commons_seed(&self, count: u64) {
        self.fakes.mobile_commons_seed(count);
    }

    /// Hostile: a Mobile Commons profile with one number written as `number` (`4155550100`),
    /// `status` (control characters and all) and `updated_at` (one in 2100), as given.
    pub fn mobile_commons_add_profile(
        &self,
        number: &str,
        status: &str,
        updated_at: chrono::DateTime<chrono::Utc>,
    ) -> MobileCommonsProfile {
        self.fakes
            .mobile_commons_add_profile(number, status, updated_at)
    }

    /// Hostile: pages of Mobile Commons' profile listing past the last repeat the last one
    /// (`on`), so a client that pages until an empty page never ends; or not.
    pub fn mobile_commons_endless(&self, on: bool) {
        self.fakes.mobile_commons_endless(on);
    }
}
