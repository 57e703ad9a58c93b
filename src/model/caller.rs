//! Callers: who a revocation binds. The FCC's revoke-all rule (47 CFR 64.1200(a)(10), in
//! force from 2027-01-31 by the order of 2026-01-06) makes a person's opt-out bind every
//! text from the same caller (a campaign, a committee), not only the program it answered.
//! A caller is named with its members, accounts or organizations of an account; an opt-out
//! recorded in one member is held in every other from the rule's date on.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{ACCOUNT_WIDE, AccountId};

/// The rule a caller's spread opt-outs stand on, as their evidence names it.
pub const REVOKE_ALL_RULE: &str = "47 CFR 64.1200(a)(10), revoke-all (FCC order of 2026-01-06)";

/// A member of a caller: a whole account, or one organization of an account.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Member {
    Account(AccountId),
    Organization(AccountId, String),
}

impl Member {
    pub fn account(&self) -> &AccountId {
        match self {
            Member::Account(account) | Member::Organization(account, _) => account,
        }
    }

    /// Whether an entry of `organization` in `account` was recorded in this member: in
    /// its account (an account member), or its organization or account-wide there.
    pub fn contains(&self, account: &AccountId, organization: &str) -> bool {
        match self {
            Member::Account(own) => own == account,
            Member::Organization(..) => self.holds(account, organization),
        }
    }

    /// Whether an opt-out of `organization` in `account` binds this member whole already:
    /// one account-wide in its account, or (an organization member) one of its
    /// organization. An opt-out of one organization does not bind its account's others.
    pub fn holds(&self, account: &AccountId, organization: &str) -> bool {
        match self {
            Member::Account(own) => own == account && organization == ACCOUNT_WIDE,
            Member::Organization(own, org) => {
                own == account && (org == organization || organization == ACCOUNT_WIDE)
            }
        }
    }

    /// Whether this member and `other` share an organization (an account and one of its
    /// organizations do).
    pub fn overlaps(&self, other: &Member) -> bool {
        match (self, other) {
            (Member::Organization(a, o), Member::Organization(b, p)) => a == b && o == p,
            _ => self.account() == other.account(),
        }
    }
}

impl std::fmt::Display for Member {
    /// `account`, or `account/organization`, as configured.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Member::Account(account) => write!(f, "{account}"),
            Member::Organization(account, organization) => write!(f, "{account}/{organization}"),
        }
    }
}

impl Serialize for Member {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// From when an opt-out binds every member of a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binds {
    /// Whenever it was given: sharing across accounts (`share_across_accounts`), which has
    /// no date.
    Always,
    /// An opt-out given (its `occurredAt`) from then on: the rule's date, at midnight in
    /// the compliance time zone.
    From(DateTime<Utc>),
    /// The rule's date is `""`: nothing spreads by itself (`callers apply` still does).
    Never,
}

/// Who a revocation binds: its members, and from when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None`: every account of the daemon, as `[consent] share_across_accounts` says.
    pub name: Option<String>,
    pub members: Vec<Member>,
    pub binds: Binds,
}

impl Caller {
    /// The caller's name as the evidence and the report give it.
    pub fn shown(&self) -> &str {
        self.name
            .as_deref()
            .unwrap_or("every account (share_across_accounts)")
    }

    /// Whether an opt-out given at `at` binds every member.
    pub fn in_force_at(&self, at: DateTime<Utc>) -> bool {
        match self.binds {
            Binds::Always => true,
            Binds::From(from) => at >= from,
            Binds::Never => false,
        }
    }

    /// Whether an entry of `organization` in `account` was recorded in a member.
    pub fn has(&self, account: &AccountId, organization: &str) -> bool {
        self.members
            .iter()
            .any(|m| m.contains(account, organization))
    }

    /// The members an opt-out of `organization` in `account` is to be held in: every
    /// member it does not bind whole already (its own account too: an opt-out of one
    /// organization binds every other of an account member). None when it is in no member.
    /// Sharing across accounts (no name) holds it in the other accounts only, as it did
    /// before callers.
    pub fn others(&self, account: &AccountId, organization: &str) -> Vec<&Member> {
        if !self.has(account, organization) {
            return Vec::new();
        }
        self.members
            .iter()
            .filter(|m| !m.holds(account, organization))
            .filter(|m| self.name.is_some() || m.account() != account)
            .collect()
    }
}

/// A caller as `callers` and `GET /v1/callers` show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallerView {
    /// Its name; `share_across_accounts` for the caller of every account that option makes.
    pub name: String,
    /// Accounts, or `account/organization`.
    pub members: Vec<String>,
    /// `always` (sharing across accounts: whenever given), `from` (the revoke-all rule's
    /// date, `from`), or `never` (`revoke_all_from = ""`).
    pub binds: String,
    /// From when an opt-out given binds every member (midnight in the compliance zone).
    pub from: Option<super::Timestamp>,
    /// An opt-out given now binds every member.
    pub in_force: bool,
}

impl CallerView {
    pub fn of(caller: &Caller, now: DateTime<Utc>) -> Self {
        let (binds, from) = match caller.binds {
            Binds::Always => ("always", None),
            Binds::From(from) => ("from", Some(super::Timestamp(from))),
            Binds::Never => ("never", None),
        };
        Self {
            name: caller
                .name
                .clone()
                .unwrap_or_else(|| "share_across_accounts".to_owned()),
            members: caller.members.iter().map(Member::to_string).collect(),
            binds: binds.to_owned(),
            from,
            in_force: caller.in_force_at(now),
        }
    }

    /// What `callers` prints of it.
    pub fn said(&self) -> String {
        let when = match (self.binds.as_str(), self.from, self.in_force) {
            ("always", ..) => "every opt-out binds every member (sharing across accounts)".to_owned(),
            (_, Some(from), true) => format!("revoke-all in force since {from}"),
            (_, Some(from), false) => format!("revoke-all not yet in force: from {from}"),
            _ => "revoke-all never in force (revoke_all_from = \"\"; `callers apply` spreads by hand)"
                .to_owned(),
        };
        format!("{}: {}; {when}", self.name, self.members.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> AccountId {
        AccountId::new(name).expect("an account")
    }

    fn caller() -> Caller {
        Caller {
            name: Some("sanchez-for-senate".into()),
            members: vec![
                Member::Account(id("party")),
                Member::Organization(id("candidate"), "org_2".into()),
            ],
            binds: Binds::From("2027-01-31T05:00:00Z".parse().expect("a time")),
        }
    }

    #[test]
    fn an_opt_out_in_one_member_is_held_in_every_other_and_nowhere_else() {
        let caller = caller();
        let party = id("party");
        let candidate = id("candidate");
        let org_2 = Member::Organization(candidate.clone(), "org_2".into());
        let whole_party = Member::Account(party.clone());
        // One organization of an account member binds the account whole, and the others.
        assert_eq!(caller.others(&party, "org_9"), vec![&whole_party, &org_2]);
        assert_eq!(caller.others(&party, ACCOUNT_WIDE), vec![&org_2]);
        assert_eq!(caller.others(&candidate, "org_2"), vec![&whole_party]);
        // An account-wide entry of the candidate covers its org_2.
        assert_eq!(caller.others(&candidate, ACCOUNT_WIDE), vec![&whole_party]);
        assert!(caller.others(&candidate, "org_3").is_empty(), "no member");
    }

    #[test]
    fn sharing_across_accounts_holds_an_opt_out_in_the_other_accounts_only() {
        let sharing = Caller {
            name: None,
            members: vec![Member::Account(id("a")), Member::Account(id("b"))],
            binds: Binds::Always,
        };
        assert_eq!(
            sharing.others(&id("a"), "org_1"),
            vec![&Member::Account(id("b"))]
        );
    }

    #[test]
    fn members_overlap_when_they_share_an_organization() {
        let party = Member::Account(id("party"));
        let org = |o: &str| Member::Organization(id("party"), o.into());
        assert!(party.overlaps(&org("org_1")) && org("org_1").overlaps(&party));
        assert!(org("org_1").overlaps(&org("org_1")));
        assert!(!org("org_1").overlaps(&org("org_2")));
        assert!(!party.overlaps(&Member::Account(id("candidate"))));
    }

    #[test]
    fn the_rule_binds_from_its_date_on_and_never_when_it_has_none() {
        let mut caller = caller();
        let day_before: DateTime<Utc> = "2027-01-31T04:59:59Z".parse().expect("a time");
        assert!(!caller.in_force_at(day_before));
        assert!(caller.in_force_at(day_before + chrono::Duration::seconds(1)));
        caller.binds = Binds::Never;
        assert!(!caller.in_force_at(day_before + chrono::Duration::days(400)));
    }
}
