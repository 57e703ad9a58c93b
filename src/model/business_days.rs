//! Business days, and the legal deadline of an opt-out counted in them.
//!
//! The FCC's TCPA rule (47 CFR 64.1200(a)(10)) requires a revocation of consent to be honoured
//! within 10 business days. Business days are counted on the calendar of one time zone (the
//! `[compliance]` section's `timezone`), skipping weekends, the US federal holidays as observed
//! (5 U.S.C. 6103, from the `bdays` crate's `USSettlement` calendar) and the configured extra
//! holidays (days closed by executive order, company holidays).

use std::collections::BTreeSet;

use bdays::HolidayCalendar;
use bdays::calendars::us::USSettlement;
use chrono::{
    DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc,
    Weekday,
};
use chrono_tz::Tz;

/// How far either side of a skipped local midnight (read as UTC) its real instant is looked
/// for: a day, more than any UTC offset a zone has had (the largest, in the 1800s, was under 16
/// hours).
const SEARCH_SECONDS: i64 = 24 * 60 * 60;

/// Business days: Monday to Friday, not a US federal holiday (observed dates) nor an extra holiday.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusinessDays {
    deadline_days: u32,
    timezone: Tz,
    extra_holidays: BTreeSet<NaiveDate>,
}

impl BusinessDays {
    /// A calendar whose deadlines fall `deadline_days` business days after an opt-out's day,
    /// with days counted in `timezone` and `extra_holidays` closed beside the federal ones.
    pub fn new(
        deadline_days: u32,
        timezone: Tz,
        extra_holidays: impl IntoIterator<Item = NaiveDate>,
    ) -> Self {
        Self {
            deadline_days,
            timezone,
            extra_holidays: extra_holidays.into_iter().collect(),
        }
    }

    /// Whether `date` is a business day: a weekday, neither a federal holiday as observed nor
    /// one of the extra holidays.
    pub fn is_business_day(&self, date: NaiveDate) -> bool {
        !matches!(date.weekday(), Weekday::Sat | Weekday::Sun)
            && !is_federal_holiday(date)
            && !self.extra_holidays.contains(&date)
    }

    /// The deadline of an opt-out made at `at`: the end of the `deadline_days`-th business day
    /// after the day of `at` (in `timezone`), as the instant the next day begins there. The day
    /// of the opt-out itself is not counted, whatever it is; with `deadline_days` 0 the deadline
    /// is the end of that day.
    ///
    /// At the very ends of chrono's range, where the days cannot be counted, the deadline is
    /// `DateTime::<Utc>::MAX_UTC` rather than a panic.
    pub fn deadline(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        local_time(self.timezone, at.naive_utc())
            .and_then(|local| self.nth_business_day_after(local.date()))
            .and_then(|last| last.succ_opt())
            .and_then(|next| start_of_day(self.timezone, next))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The `deadline_days`-th business day after `day`, or `None` past the calendar's end.
    /// When `date` begins in the calendar's zone (the first instant of it, should its
    /// midnight be skipped by a clock change).
    pub fn day_start(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        start_of_day(self.timezone, date)
    }

    /// The day `at` falls on in the calendar's zone.
    pub fn day_of(&self, at: DateTime<Utc>) -> NaiveDate {
        at.with_timezone(&self.timezone).date_naive()
    }

    fn nth_business_day_after(&self, day: NaiveDate) -> Option<NaiveDate> {
        let mut date = day;
        for _ in 0..self.deadline_days {
            date = date.succ_opt()?;
            while !self.is_business_day(date) {
                date = date.succ_opt()?;
            }
        }
        Some(date)
    }
}

/// Whether `date` is a US federal holiday as observed under 5 U.S.C. 6103 and OPM's practice: a
/// holiday on a Saturday is observed the Friday before (New Year's Day on the Friday, December
/// 31, of the year before), one on a Sunday the Monday after. `USSettlement` does exactly this;
/// it agrees with every date OPM published for 2025 to 2027 (see the tests). Inauguration Day
/// (6103(c)) is left out on purpose: it is a holiday only for federal employees around
/// Washington, D.C., not a national one.
fn is_federal_holiday(date: NaiveDate) -> bool {
    // `bdays` builds each holiday with `expect` and steps a day across a year's end, which
    // panics in the first and last years a `NaiveDate` can hold; no deadline falls there.
    let year = date.year();
    year > NaiveDate::MIN.year() && year < NaiveDate::MAX.year() && USSettlement.is_holiday(date)
}

/// The local time in `zone` at the UTC time `utc`, or `None` past the end of chrono's range
/// (where chrono's own conversion would panic).
fn local_time(zone: Tz, utc: NaiveDateTime) -> Option<NaiveDateTime> {
    utc.checked_add_offset(zone.offset_from_utc_datetime(&utc).fix())
}

/// The instant `date` begins in `zone`: local midnight; the earlier one when the clocks turned
/// back across midnight; the moment the clocks jumped when they skipped midnight (as in zones
/// that start summer time at 00:00, such as Cairo).
fn start_of_day(zone: Tz, date: NaiveDate) -> Option<DateTime<Utc>> {
    let midnight = date.and_time(NaiveTime::MIN);
    match zone.from_local_datetime(&midnight) {
        LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => Some(at.with_timezone(&Utc)),
        LocalResult::None => first_instant_reaching(zone, midnight),
    }
}

/// The first instant whose local time in `zone` is `local` or later, for a `local` the clocks
/// skipped. Offsets stay within a day, so the instant lies within a day of `local` read as UTC,
/// and across the skip local time only moves forward: bisection to the second finds it.
fn first_instant_reaching(zone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    let reaches = |seconds: i64| {
        DateTime::from_timestamp(seconds, 0)
            .and_then(|at| local_time(zone, at.naive_utc()))
            .is_none_or(|time| time >= local)
    };
    let read_as_utc = local.and_utc().timestamp();
    let (mut before, mut after) = (read_as_utc - SEARCH_SECONDS, read_as_utc + SEARCH_SECONDS);
    while after - before > 1 {
        let middle = before + (after - before) / 2;
        if reaches(middle) {
            after = middle;
        } else {
            before = middle;
        }
    }
    DateTime::from_timestamp(after, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The federal holidays OPM published for 2025, 2026 and 2027, on their observed dates.
    #[rustfmt::skip]
    const OPM_HOLIDAYS: [&str; 34] = [
        "2025-01-01", "2025-01-20", "2025-02-17", "2025-05-26", "2025-06-19", "2025-07-04",
        "2025-09-01", "2025-10-13", "2025-11-11", "2025-11-27", "2025-12-25",
        "2026-01-01", "2026-01-19", "2026-02-16", "2026-05-25", "2026-06-19", "2026-07-03",
        "2026-09-07", "2026-10-12", "2026-11-11", "2026-11-26", "2026-12-25",
        "2027-01-01", "2027-01-18", "2027-02-15", "2027-05-31", "2027-06-18", "2027-07-05",
        "2027-09-06", "2027-10-11", "2027-11-11", "2027-11-25", "2027-12-24", "2027-12-31",
    ];

    fn date(year: i32, month: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(year, month, day).expect("a valid date")
    }

    fn utc(instant: &str) -> DateTime<Utc> {
        instant.parse().expect("an RFC 3339 instant")
    }

    fn new_york() -> BusinessDays {
        BusinessDays::new(10, chrono_tz::America::New_York, [])
    }

    fn opm_holidays() -> BTreeSet<NaiveDate> {
        let parse = |day: &&str| day.parse().expect("a YYYY-MM-DD date");
        OPM_HOLIDAYS.iter().map(parse).collect()
    }

    #[test]
    fn every_opm_federal_holiday_of_2025_to_2027_is_not_a_business_day() {
        let calendar = new_york();
        for holiday in opm_holidays() {
            assert!(!calendar.is_business_day(holiday), "{holiday} is a holiday");
        }
    }

    #[test]
    fn every_other_weekday_of_2025_to_2027_is_a_business_day_and_no_weekend_day_is() {
        let (calendar, holidays) = (new_york(), opm_holidays());
        for day in date(2025, 1, 1)
            .iter_days()
            .take_while(|d| d.year() <= 2027)
        {
            let weekend = matches!(day.weekday(), Weekday::Sat | Weekday::Sun);
            let expected = !weekend && !holidays.contains(&day);
            assert_eq!(calendar.is_business_day(day), expected, "{day}");
        }
    }

    #[test]
    fn an_opt_out_before_thanksgiving_2026_is_due_when_december_9_begins_in_new_york() {
        let due = utc("2026-12-09T05:00:00Z");
        assert_eq!(new_york().deadline(utc("2026-11-23T20:00:00Z")), due);
        // 22:00 on Monday the 23rd in New York: still Monday there.
        assert_eq!(new_york().deadline(utc("2026-11-24T03:00:00Z")), due);
    }

    #[test]
    fn the_day_of_the_opt_out_is_not_counted_even_on_a_holiday() {
        let on_wednesday = new_york().deadline(utc("2026-11-25T15:00:00Z"));
        let on_thanksgiving = new_york().deadline(utc("2026-11-26T15:00:00Z"));
        assert_eq!(on_wednesday, utc("2026-12-11T05:00:00Z"));
        assert_eq!(on_thanksgiving, on_wednesday);
    }

    #[test]
    fn an_extra_holiday_moves_the_deadline_by_one_business_day() {
        let with = |extra| BusinessDays::new(10, chrono_tz::America::New_York, [extra]);
        let at = utc("2026-11-23T20:00:00Z");
        assert_eq!(
            with(date(2026, 11, 27)).deadline(at),
            utc("2026-12-10T05:00:00Z")
        );
        // An extra holiday on a Saturday closes nothing more.
        assert_eq!(
            with(date(2026, 11, 28)).deadline(at),
            utc("2026-12-09T05:00:00Z")
        );
    }

    #[test]
    fn an_opt_out_across_the_november_2026_clock_change_is_due_at_midnight_standard_time() {
        // Sunday 1 November 2026: 01:59:59 EDT, then 01:00:00 EST an instant later. Monday 2
        // to Monday 16, less Veterans Day, are the ten days; the 17th begins at 05:00 UTC.
        let due = utc("2026-11-17T05:00:00Z");
        assert_eq!(new_york().deadline(utc("2026-11-01T05:59:59Z")), due);
        assert_eq!(new_york().deadline(utc("2026-11-01T06:00:00Z")), due);
    }

    #[test]
    fn a_deadline_on_a_day_whose_midnight_was_skipped_is_when_the_clocks_jumped() {
        // Cairo starts summer time on the last Friday of April at 00:00, straight to 01:00.
        let cairo = chrono_tz::Africa::Cairo;
        let friday = date(2026, 4, 24).and_time(NaiveTime::MIN);
        assert_eq!(cairo.from_local_datetime(&friday), LocalResult::None);
        let calendar = BusinessDays::new(1, cairo, []);
        let due = calendar.deadline(utc("2026-04-22T10:00:00Z"));
        assert_eq!(due, utc("2026-04-23T22:00:00Z"));
    }

    #[test]
    fn a_deadline_at_the_ends_of_time_saturates_instead_of_panicking() {
        let zones = [chrono_tz::America::New_York, chrono_tz::Pacific::Kiritimati];
        for zone in zones {
            let calendar = BusinessDays::new(10, zone, []);
            for at in [DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC] {
                let _ = calendar.deadline(at);
            }
            assert_eq!(
                calendar.deadline(DateTime::<Utc>::MAX_UTC),
                DateTime::<Utc>::MAX_UTC
            );
        }
    }
}
