//! The compliance report: for every opt-out, when each destination had it against its legal
//! deadline (`[compliance]`: business days in a time zone), and every message sent to the
//! person after it. The JSON form is the contract; the CLI's text and CSV are views of it.
//!
//! Destinations: the service, each `[[subscriber]]` whose filters take the entry, and each
//! `[[destination]]` (a system of record) that takes it. The service had an opt-out it
//! announced (webhook, reconciliation) at the event's own time, and one made here (local,
//! import, suppression) when its push was answered 2xx; an opt-out made here with no push
//! (no lead at the service to send it to, or a newer change sent instead) has no service
//! destination. A subscriber had it when the request carrying it was answered 2xx
//! (`subscriber_acks`); a system of record when its outcome is `sent`. An `unmatched` or
//! `refused` outcome keeps the opt-out from being honoured: once every other destination
//! had it, it is [`State::Unreachable`].

mod items;
mod output;
mod tally;
mod view;
pub use items::{Items, PAGE};
pub use output::{Blocking, Listing, Sink, WriteError, summarize, write};
pub use tally::{LISTED, Summary, Tally};
pub use view::{View, behind, given, html, unreached, waiting};

use crate::model::{AccountId, Scope};
use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::model::business_days::BusinessDays;
use crate::model::{OutcomeKind, Source, Timestamp};
use crate::sender::Subscriber;
use crate::store::{ComplianceStore, Pool, SubscriberStore};

/// The service as a destination.
pub const SERVICE: &str = "service";
/// Most opt-outs per destination looked at for the gauges (the oldest come first).
const GAUGE_LOOK: i64 = 10_000;

/// What is not honoured yet, for the metrics: per destination the age of the oldest opt-out
/// it has not had, and how many opt-outs are past their deadline and not everywhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    /// (destination, seconds): 0 when it has had every opt-out.
    pub oldest_pending_secs: Vec<(String, f64)>,
    pub overdue: u64,
}

/// The [`Backlog`] as of `now`: the service's from the push queue, each subscriber's and
/// each destination's from the opt-outs after its cursor (each looked at up to
/// [`GAUGE_LOOK`] opt-outs deep). An opt-out a destination found no one for, or that it
/// refused, is behind its cursor: neither pending nor overdue there.
pub async fn backlog(
    pool: &Pool,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<Backlog, crate::store::Error> {
    let age = |at: Option<Timestamp>| {
        at.map_or(0.0, |at| {
            (now - at.at()).num_milliseconds().max(0) as f64 / 1000.0
        })
    };
    let mut overdue = BTreeSet::new();
    let mut count_overdue = |seq: i64, at: Timestamp| {
        if rules.calendar.deadline(at.at()) < now {
            overdue.insert(seq);
        }
    };
    let unsent = pool.unsent_opt_outs(GAUGE_LOOK).await?;
    for (seq, at) in &unsent {
        count_overdue(*seq, *at);
    }
    let mut oldest = vec![(
        SERVICE.to_owned(),
        age(unsent.iter().map(|(_, at)| *at).min()),
    )];
    for subscriber in rules.subscribers.iter().chain(&rules.destinations) {
        let cursor = pool
            .subscriber_state(&subscriber.name)
            .await?
            .map_or(0, |state| state.cursor);
        let behind: Vec<(i64, Timestamp)> = pool
            .opt_outs_after(cursor, GAUGE_LOOK)
            .await?
            .into_iter()
            .filter(|(_, (account, org), source, _)| subscriber.takes_from(account, org, *source))
            .map(|(seq, _, _, at)| (seq, at))
            .collect();
        for (seq, at) in &behind {
            count_overdue(*seq, *at);
        }
        let first = behind.iter().map(|(_, at)| *at).min();
        oldest.push((subscriber.name.clone(), age(first)));
    }
    Ok(Backlog {
        oldest_pending_secs: oldest,
        overdue: overdue.len() as u64,
    })
}

/// What a report covers: opt-outs that occurred in `since..until`, in one organization or
/// all, of one account or all.
#[derive(Debug, Clone)]
pub struct Window {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub organization: Option<String>,
    pub account: Option<AccountId>,
}

/// What the report is measured against.
pub struct Rules {
    pub calendar: BusinessDays,
    /// The calendar's zone, as configured.
    pub timezone: String,
    pub deadline_business_days: u32,
    pub confirmation_window: TimeDelta,
    pub subscribers: Vec<Arc<Subscriber>>,
    /// The systems of record (`[[destination]]`), after the subscribers.
    pub destinations: Vec<Arc<Subscriber>>,
    /// The callers: from its caller's date, each member an opt-out does not bind whole
    /// already is a destination of it (named [`member_destination`]); with `[consent]
    /// share_across_accounts`, every account of the opt-outs of the others.
    pub callers: Vec<crate::model::caller::Caller>,
    /// The sources (`[[source]]`): one that has not read lately is said in the report, as
    /// the opt-outs given there since are not in it yet.
    pub sources: Vec<crate::settings::SourceSettings>,
}

/// The destination name of `member` of `caller`, for an opt-out held there: `account:ID`
/// shared across accounts, `caller:NAME:MEMBER` for a `[[caller]]`.
pub fn member_destination(
    caller: &crate::model::caller::Caller,
    member: &crate::model::caller::Member,
) -> String {
    match &caller.name {
        None => format!("account:{}", member.account()),
        Some(name) => format!("caller:{name}:{member}"),
    }
}

/// Every member's destination name, in the order of the callers.
pub fn member_destinations(rules: &Rules) -> Vec<String> {
    rules
        .callers
        .iter()
        .flat_map(|c| c.members.iter().map(|m| member_destination(c, m)))
        .collect()
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceReport)]
pub struct Report {
    pub since: Timestamp,
    pub until: Timestamp,
    pub deadline_business_days: u32,
    pub totals: Totals,
    pub destinations: Vec<DestinationSummary>,
    pub items: Vec<Item>,
    pub sources: Vec<SourceStanding>,
    pub review: ReviewStanding,
}

/// How long a source may go without a read to its end, in its intervals, before the report
/// says it is behind: one run missed (a run itself takes a while: VAN's export jobs).
pub const BEHIND_AFTER_INTERVALS: u32 = 2;

/// A source as the report shows it: when it last read to its end, and whether that is
/// longer ago than it should be ([`BEHIND_AFTER_INTERVALS`]); opt-outs given there since
/// are not in the report yet.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceSource)]
pub struct SourceStanding {
    pub name: String,
    /// `van`, `action_network` or `twilio`.
    pub kind: String,
    /// When it last read to its end (none: never yet); for a source a system posts to
    /// (`twilio`), when it was last posted a reply.
    pub last_success_at: Option<Timestamp>,
    pub every_secs: u64,
    /// No read to its end within its last two intervals (never for a source a system
    /// posts to: no reply for a while is no fault).
    pub behind: bool,
    /// Why its last run stopped, if it did.
    pub last_error: Option<String>,
}

impl SourceStanding {
    /// A system posts replies to it, rather than the daemon reading it.
    pub fn posted(&self) -> bool {
        self.kind
            .parse::<crate::model::Source>()
            .is_ok_and(crate::model::Source::posted)
    }

    /// What the text and the printable report say of it.
    pub fn said(&self) -> String {
        let posted = self.posted();
        let last = match (self.last_success_at, posted) {
            (None, false) => "never read yet".to_owned(),
            (None, true) => "posted nothing yet".to_owned(),
            (Some(at), false) => format!("last read {at}"),
            (Some(at), true) => format!("last posted {at}"),
        };
        let behind = if self.behind { "BEHIND: " } else { "" };
        let error = self
            .last_error
            .as_deref()
            .map_or_else(String::new, |e| format!("; its last run stopped: {e}"));
        let how = if posted {
            "posted to by its system".to_owned()
        } else {
            format!("reads every {} s", self.every_secs)
        };
        format!(
            "{behind}{} ({}), {last}, {how}{error}",
            self.name, self.kind
        )
    }
}

/// The sources of `rules` as they stand at `now`.
pub async fn standings(
    pool: &Pool,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<Vec<SourceStanding>, crate::store::Error> {
    let views = crate::sources::views(pool, &rules.sources).await?;
    Ok(rules
        .sources
        .iter()
        .zip(views)
        .map(|(settings, view)| {
            let allowed = i64::try_from(
                settings
                    .every_secs
                    .saturating_mul(u64::from(BEHIND_AFTER_INTERVALS)),
            )
            .unwrap_or(i64::MAX);
            let behind = settings.system.polled()
                && view
                    .last_success_at
                    .is_none_or(|at| (now - at.at()).num_seconds() > allowed);
            SourceStanding {
                name: view.name,
                kind: view.kind,
                last_success_at: view.last_success_at,
                every_secs: settings.every_secs,
                behind,
                last_error: view.last_error,
            }
        })
        .collect())
}

/// The replies put to a person (`outreach-sync review`) as the report shows them: none is
/// an opt-out until decided, and each is due by the deadline from its receipt. A reply has
/// no organization until decided: these are the daemon's, whatever the report's scope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceReview)]
pub struct ReviewStanding {
    /// Replies waiting for a decision now, whenever they were received.
    pub waiting: u64,
    /// When the oldest of them is due (none waiting: null).
    pub oldest_due: Option<Timestamp>,
    /// The oldest waits past its due date.
    pub overdue: bool,
    /// Replies received in the window and decided an opt-out: each is an opt-out of the
    /// report, occurred when the reply was received.
    pub decided_opt_out: u64,
    /// Replies received in the window and decided not an opt-out.
    pub decided_not_opt_out: u64,
}

impl ReviewStanding {
    /// What the text report says of it.
    pub fn said(&self) -> String {
        let decided = format!(
            "received in the window and decided: {} an opt-out, {} not",
            self.decided_opt_out, self.decided_not_opt_out
        );
        match self.oldest_due {
            None => format!("none waiting; {decided}"),
            Some(due) => format!(
                "{} waiting, the oldest due {due}{}; {decided}",
                self.waiting,
                if self.overdue { " (OVERDUE)" } else { "" }
            ),
        }
    }
}

/// The replies kept for review as they stand at `now`, those of `window` decided.
pub async fn review_standing(
    pool: &Pool,
    rules: &Rules,
    window: &Window,
    now: DateTime<Utc>,
) -> Result<ReviewStanding, crate::store::Error> {
    use crate::store::ReviewStore as _;
    let (waiting, oldest, opt_out, not_opt_out) = pool
        .review_tally(Timestamp(window.since), Timestamp(window.until))
        .await?;
    let oldest_due = oldest.map(|at| Timestamp(rules.calendar.deadline(at.0)));
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(ReviewStanding {
        waiting: count(waiting),
        oldest_due,
        overdue: oldest_due.is_some_and(|due| due.0 < now),
        decided_opt_out: count(opt_out),
        decided_not_opt_out: count(not_opt_out),
    })
}

#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceTotals)]
pub struct Totals {
    pub opt_outs: u64,
    pub honoured: u64,
    pub honoured_late: u64,
    pub pending: u64,
    pub overdue: u64,
    pub sent_after_opt_out: u64,
    /// Opt-outs every destination had but a system of record that found no one for it
    /// (`unmatched`) or refused it.
    pub unreachable: u64,
    /// Of `optOuts`, those of a number for a whole account (organization `*`: an
    /// `--account` import, or an opt-out shared from another account). Each is counted once
    /// among the states above; the service and the person-based systems had it through the
    /// entries recorded with it for the organizations holding the number.
    pub account_wide: u64,
}

/// How fast one destination had the opt-outs it had, in seconds after each occurred.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSummary {
    pub name: String,
    pub honoured: u64,
    pub pending: u64,
    /// Opt-outs it could not be given: `unmatched` or `refused` (a system of record).
    pub unreachable: u64,
    pub p50_secs: Option<f64>,
    pub p99_secs: Option<f64>,
    pub max_secs: Option<f64>,
}

/// Where an opt-out stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceState)]
pub enum State {
    /// Every destination had it by the deadline.
    Honoured,
    /// Every destination had it, one after the deadline.
    HonouredLate,
    /// Not yet everywhere; the deadline is ahead.
    Pending,
    /// Not yet everywhere; the deadline has passed.
    Overdue,
    /// Every destination had it but a system of record that found no one for it or refused
    /// it: a finding to look into, neither honoured nor waiting.
    Unreachable,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Honoured => "honoured",
            State::HonouredLate => "honouredLate",
            State::Pending => "pending",
            State::Overdue => "overdue",
            State::Unreachable => "unreachable",
        }
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ComplianceItem)]
pub struct Item {
    pub seq: i64,
    pub phone_number: String,
    pub organization_id: String,
    /// The account of the service it was given in.
    pub account_id: String,
    pub lead_id: Option<String>,
    pub occurred_at: Timestamp,
    pub source: Source,
    /// The `[[source]]` that read it back (VAN, Action Network), for such an opt-out: its
    /// deadline runs from `occurredAt`, when the person gave it there.
    pub read_by: Option<String>,
    /// When the daemon first had it (recorded it in the ledger).
    pub seen_at: Timestamp,
    pub state: State,
    /// The end of the last business day allowed.
    pub deadline: Timestamp,
    /// When the slowest destination had it, once every one has.
    pub honoured_at: Option<Timestamp>,
    pub destinations: Vec<DestinationTime>,
    /// The one message allowed within the confirmation window.
    pub confirmation: Option<Message>,
    pub sent_after_opt_out: Vec<Message>,
}

/// When one destination had an opt-out; for a system of record that could not be given
/// it, why (`outcome` and `reason` are only present then), and for one that had it
/// without a request of its own, how (`already`: told by an earlier entry, honoured when
/// that one was; `through_leads`: an account-wide opt-out, honoured when its leads'
/// entries were).
#[derive(Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct DestinationTime {
    pub name: String,
    #[schema(rename = "honouredAt")]
    pub honoured_at: Option<Timestamp>,
    /// `unmatched`, `refused`, `unconfirmed` (not had), `already` or `through_leads` (had
    /// without a request of its own): present only then.
    #[schema(required = false)]
    pub outcome: Option<OutcomeKind>,
    /// What the system of record said, why no one was found, or which entry told it:
    /// present with `outcome`.
    #[schema(required = false)]
    pub reason: Option<String>,
}

impl DestinationTime {
    /// A destination that had it at `honoured_at`, or has not yet.
    pub fn had(name: &str, honoured_at: Option<Timestamp>) -> Self {
        Self {
            name: name.to_owned(),
            honoured_at,
            outcome: None,
            reason: None,
        }
    }

    /// Whether it could not be given the opt-out (`unmatched`, `refused`,
    /// `unconfirmed`).
    pub fn unreached(&self) -> bool {
        self.outcome.is_some_and(OutcomeKind::unreached)
    }
}

/// `{"name","honouredAt"}`, with `"outcome"` and `"reason"` only for a system of record
/// that could not be given the opt-out or had it without a request of its own.
impl Serialize for DestinationTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("honouredAt", &self.honoured_at)?;
        if let Some(outcome) = self.outcome {
            map.serialize_entry("outcome", &outcome)?;
            map.serialize_entry("reason", &self.reason)?;
        }
        map.end()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = SentMessage)]
pub struct Message {
    pub id: String,
    pub status: String,
    pub created_at: Timestamp,
}

/// How far back a report looks when no start is given.
pub const DEFAULT_DAYS: i64 = 30;

/// Why a window cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WindowError(String);

impl Window {
    /// The window of `since` and `until` as given (a `YYYY-MM-DD` day in the calendar's
    /// zone, `until` taking the whole day; or an RFC 3339 instant): by default the
    /// [`DEFAULT_DAYS`] days up to `now`.
    pub fn parse(
        since: Option<&str>,
        until: Option<&str>,
        organization: Option<String>,
        calendar: &BusinessDays,
        now: DateTime<Utc>,
    ) -> Result<Self, WindowError> {
        let until = match until.filter(|u| !u.trim().is_empty()) {
            Some(text) => instant(text, "until", calendar, 1)?,
            None => now,
        };
        let since = match since.filter(|s| !s.trim().is_empty()) {
            Some(text) => instant(text, "since", calendar, 0)?,
            None => until - TimeDelta::days(DEFAULT_DAYS),
        };
        // Times are stored as RFC 3339 text on SQLite, which sorts as time only up to the
        // year 9999 ("+10000-01-01" sorts before "2026"): nothing is recorded past it, so a
        // window reaching further ends there.
        let (since, until) = (since.min(last_instant()), until.min(last_instant()));
        if since >= until {
            return Err(WindowError(format!(
                "since ({}) must be before until ({})",
                Timestamp(since),
                Timestamp(until)
            )));
        }
        let organization = organization.filter(|o| !o.trim().is_empty());
        Ok(Self {
            since,
            until,
            organization,
            account: None,
        })
    }

    /// The window of the account named `account` only (every account's with `None` or a
    /// blank name). A filter: a name no account can have matches nothing.
    pub fn in_account(mut self, account: Option<String>) -> Self {
        self.account = account
            .filter(|a| !a.trim().is_empty())
            .map(|name| AccountId::stored(&name));
        self
    }

    /// The organization and the account the report reads (`None`: every one).
    pub fn scope(&self) -> Scope<'_> {
        Scope::organization(self.organization.as_deref()).in_account(self.account.as_ref())
    }
}

/// The last instant a window can reach: the end of the year 9999.
fn last_instant() -> DateTime<Utc> {
    chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|day| day.and_hms_milli_opt(23, 59, 59, 999))
        .map_or(DateTime::<Utc>::MAX_UTC, |at| at.and_utc())
}

/// `text` as an instant: RFC 3339, or the start of a `YYYY-MM-DD` day `days_after` days
/// later in the calendar's zone.
fn instant(
    text: &str,
    name: &str,
    calendar: &BusinessDays,
    days_after: u64,
) -> Result<DateTime<Utc>, WindowError> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.to_utc());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.checked_add_days(chrono::Days::new(days_after)))
        .and_then(|day| calendar.day_start(day))
        .ok_or_else(|| {
            WindowError(format!(
                "{name}: {text:?} is neither a YYYY-MM-DD day nor an RFC 3339 time"
            ))
        })
}

impl Default for Rules {
    /// The defaults of `[compliance]`, with no subscriber nor destination.
    fn default() -> Self {
        let compliance = crate::settings::ComplianceSettings::default();
        Self {
            calendar: BusinessDays::new(
                compliance.deadline_business_days,
                chrono_tz::America::New_York,
                [],
            ),
            timezone: compliance.timezone,
            deadline_business_days: compliance.deadline_business_days,
            confirmation_window: TimeDelta::seconds(300),
            subscribers: Vec::new(),
            destinations: Vec::new(),
            callers: Vec::new(),
            sources: Vec::new(),
        }
    }
}

impl Rules {
    /// The rules of the configuration: its calendar and window, its subscribers and
    /// destinations.
    pub fn of(
        settings: &crate::settings::Settings,
    ) -> Result<Self, crate::settings::SettingsError> {
        let compliance = &settings.compliance;
        Ok(Self {
            calendar: compliance.business_days()?,
            timezone: compliance.timezone.clone(),
            deadline_business_days: compliance.deadline_business_days,
            confirmation_window: TimeDelta::seconds(
                i64::try_from(compliance.confirmation_window_secs).unwrap_or(i64::MAX),
            ),
            subscribers: crate::sender::configured(&settings.subscriber),
            // Only their filters are read here: the keys are never used.
            destinations: crate::sender::destinations::configured(
                &settings.destination,
                &crate::settings::Live::new(crate::settings::keys_of(&settings.destination)),
                &crate::settings::Live::new(settings.source.clone()),
            ),
            callers: settings.callers()?,
            sources: settings.source.clone(),
        })
    }
}

/// The report of `window` as of `now`, whole in memory: for the demo and the tests. The
/// listeners and the CLI read it a page at a time ([`Items`], [`Tally`]).
pub async fn report(
    pool: &Pool,
    rules: &Arc<Rules>,
    window: &Window,
    now: DateTime<Utc>,
) -> Result<Report, crate::store::Error> {
    let mut pages = Items::new(pool.clone(), rules.clone(), window.clone(), now);
    let mut tally = Tally::new(rules, window);
    let mut items = Vec::new();
    while let Some(page) = pages.next_page().await? {
        tally.add(&page);
        items.extend(page);
    }
    let summary = tally.finish();
    Ok(Report {
        since: summary.since,
        until: summary.until,
        deadline_business_days: summary.deadline_business_days,
        totals: summary.totals,
        destinations: summary.destinations,
        items,
        sources: standings(pool, rules, now).await?,
        review: review_standing(pool, rules, window, now).await?,
    })
}
