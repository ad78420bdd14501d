//! The UTC calendar the usage aggregates and budgets are kept in: hours, days and months since
//! the epoch, and the two ways a range is written (`2026-01-31`, RFC 3339).
//!
//! Days and months are UTC everywhere (a budget resets at 00:00 UTC), so a bucket means the
//! same hours on every machine and after a time-zone change. Civil dates are converted with
//! Howard Hinnant's `days_from_civil` algorithm: exact for every date of the proleptic
//! Gregorian calendar, no table, no dependency.

use std::fmt::{self, Write as _};

use crate::clock::UnixMillis;

pub const HOUR_MS: u64 = 3_600_000;
pub const DAY_MS: u64 = 24 * HOUR_MS;

/// A civil date in UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

impl Date {
    /// The date `days` days after 1970-01-01.
    pub fn from_days(days: u64) -> Self {
        // Hinnant's civil_from_days, shifted so that the era arithmetic stays unsigned.
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        #[expect(
            clippy::cast_possible_truncation,
            reason = "day ≤ 31, month ≤ 12, and a year from u64 days fits i32 for every date a clock gives"
        )]
        Self { year: year as i32, month: month as u32, day: day as u32 }
    }

    /// Days since 1970-01-01; `None` before it.
    pub fn days(self) -> Option<u64> {
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        u64::try_from(era * 146_097 + doe - 719_468).ok()
    }

    fn is_valid(self) -> bool {
        (1..=12).contains(&self.month) && self.day >= 1 && self.day <= days_in_month(self)
    }

    /// The first day of the month after this date's.
    #[must_use]
    pub fn next_month(self) -> Self {
        if self.month == 12 {
            Self { year: self.year + 1, month: 1, day: 1 }
        } else {
            Self { year: self.year, month: self.month + 1, day: 1 }
        }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn days_in_month(date: Date) -> u32 {
    match date.month {
        2 if date.year % 4 == 0 && (date.year % 100 != 0 || date.year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Hours since the epoch: the unit the aggregates are kept in.
pub fn hour_of(at: UnixMillis) -> u64 {
    at.0 / HOUR_MS
}

/// Days since the epoch.
pub fn day_of(at: UnixMillis) -> u64 {
    at.0 / DAY_MS
}

/// 00:00 UTC of `at`'s day.
pub fn start_of_day(at: UnixMillis) -> UnixMillis {
    UnixMillis(day_of(at) * DAY_MS)
}

/// 00:00 UTC of the first day of `at`'s month.
pub fn start_of_month(at: UnixMillis) -> UnixMillis {
    let date = Date::from_days(day_of(at));
    let first = Date { day: 1, ..date };
    UnixMillis(first.days().unwrap_or(0) * DAY_MS)
}

/// 00:00 UTC of the first day of the month after `at`'s.
pub fn start_of_next_month(at: UnixMillis) -> UnixMillis {
    let next = Date::from_days(day_of(at)).next_month();
    UnixMillis(next.days().unwrap_or(0) * DAY_MS)
}

/// `2026-01-31T09:05:07Z`, with milliseconds only when there are some (`…07.250Z`), as
/// Anthropic writes its reset times.
pub fn rfc3339(at: UnixMillis) -> String {
    let date = Date::from_days(day_of(at));
    let of_day = at.0 % DAY_MS;
    let (h, m, s) = (of_day / 3_600_000, of_day / 60_000 % 60, of_day / 1000 % 60);
    let mut out = format!("{date}T{h:02}:{m:02}:{s:02}");
    if !of_day.is_multiple_of(1000) {
        let _ = write!(out, ".{:03}", of_day % 1000);
    }
    out.push('Z');
    out
}

/// One end of a range as written: a whole UTC day, or an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// `2026-01-31`: that UTC day, from 00:00.
    Day(UnixMillis),
    /// RFC 3339, with `Z` or an offset: exactly then.
    Instant(UnixMillis),
}

/// Why a date or instant was not understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is neither a date (2026-01-31) nor an RFC 3339 time (2026-01-31T09:00:00Z)")]
pub struct MomentError(pub String);

impl Moment {
    /// Parses `2026-01-31` or an RFC 3339 time (`2026-01-31T09:00:00Z`, `…+02:00`, fractional
    /// seconds allowed). Dates before 1970 are refused.
    pub fn parse(text: &str) -> Result<Self, MomentError> {
        let refuse = || MomentError(text.chars().take(64).collect());
        let bytes = text.as_bytes();
        let date = parse_date(bytes.get(..10).ok_or_else(refuse)?).ok_or_else(refuse)?;
        let day = date.days().ok_or_else(refuse)?;
        let rest = &bytes[10..];
        if rest.is_empty() {
            return Ok(Self::Day(UnixMillis(day * DAY_MS)));
        }
        let millis = parse_time(rest).ok_or_else(refuse)?;
        let at = i64::try_from(day * DAY_MS).map_err(|_| refuse())? + millis;
        u64::try_from(at).map(|at| Self::Instant(UnixMillis(at))).map_err(|_| refuse())
    }
}

/// `YYYY-MM-DD`.
fn parse_date(b: &[u8]) -> Option<Date> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let year = i32::try_from(digits(&b[0..4])?).ok()?;
    let month = u32::try_from(digits(&b[5..7])?).ok()?;
    let day = u32::try_from(digits(&b[8..10])?).ok()?;
    let date = Date { year, month, day };
    date.is_valid().then_some(date)
}

/// `THH:MM:SS[.fff…](Z|±HH:MM)`, as milliseconds from the day's UTC midnight (negative or past
/// a day once the offset is applied).
fn parse_time(b: &[u8]) -> Option<i64> {
    if b.len() < 10 || !matches!(b[0], b'T' | b't' | b' ') || b[3] != b':' || b[6] != b':' {
        return None;
    }
    let (h, m, s) = (digits(&b[1..3])?, digits(&b[4..6])?, digits(&b[7..9])?);
    // 60 is a leap second; it reads as the next second, which is what an hour bucket needs.
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    let mut rest = &b[9..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let kept = &fraction[..n.min(3)];
        millis = digits(kept)? * 10u64.pow(3 - u32::try_from(kept.len()).ok()?);
        rest = &fraction[n..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), oh1, oh2, b':', om1, om2] => {
            let (oh, om) = (digits(&[*oh1, *oh2])?, digits(&[*om1, *om2])?);
            if oh > 23 || om > 59 {
                return None;
            }
            let minutes = i64::try_from(oh * 60 + om).ok()?;
            if *sign == b'+' { minutes } else { -minutes }
        }
        _ => return None,
    };
    let local = i64::try_from(((h * 60 + m) * 60 + s) * 1000 + millis).ok()?;
    Some(local - offset * 60_000)
}

fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> UnixMillis {
        match Moment::parse(text).unwrap() {
            Moment::Day(at) | Moment::Instant(at) => at,
        }
    }

    #[test]
    fn dates_round_trip_through_days_since_the_epoch_across_leap_years_and_centuries() {
        for days in (0..200_000).step_by(7).chain([0, 59, 60, 365, 10_957, 11_016, 47_541]) {
            let date = Date::from_days(days);
            assert_eq!(date.days(), Some(days), "{date}");
            assert!(date.is_valid(), "{date}");
        }
        assert_eq!(Date::from_days(0).to_string(), "1970-01-01");
        // 2000 is a leap year (divisible by 400), 2100 is not.
        assert_eq!(Date { year: 2000, month: 2, day: 29 }.days(), Some(11_016));
        assert!(!Date { year: 2100, month: 2, day: 29 }.is_valid());
        assert_eq!(Date::from_days(20_454).to_string(), "2026-01-01");
    }

    #[test]
    fn a_date_is_its_utc_midnight_and_an_instant_applies_its_offset() {
        assert_eq!(Moment::parse("1970-01-02"), Ok(Moment::Day(UnixMillis(DAY_MS))));
        assert_eq!(at("2026-01-31T00:00:00Z"), at("2026-01-31"));
        assert_eq!(at("2026-01-31T02:00:00+02:00"), at("2026-01-31"));
        assert_eq!(at("2026-01-30T19:00:00-05:00"), at("2026-01-31"));
        assert_eq!(at("2026-01-31T09:30:15.25Z").0 - at("2026-01-31").0, 34_215_250);
        assert_eq!(at("2026-01-31T09:30:15.123456Z").0 % 1000, 123, "sub-milliseconds drop");
    }

    #[test]
    fn anything_else_is_refused_with_the_text_and_both_accepted_forms() {
        for bad in [
            "",
            "yesterday",
            "2026-1-31",
            "2026-02-30",
            "2026-13-01",
            "2026-01-31T25:00:00Z",
            "2026-01-31T09:00:00",
            "2026-01-31T09:00Z",
            "2026-01-31T09:00:00.Z",
            "2026-01-31T09:00:00+2:00",
            "1969-12-31",
            "2026-01-31x",
        ] {
            let error = Moment::parse(bad).unwrap_err().to_string();
            assert!(error.contains("2026-01-31T09:00:00Z"), "{bad}: {error}");
        }
    }

    #[test]
    fn months_start_and_end_on_their_first_days_in_utc() {
        let mid = at("2024-02-15T13:00:00Z");
        assert_eq!(start_of_month(mid), at("2024-02-01"));
        assert_eq!(start_of_next_month(mid), at("2024-03-01"));
        assert_eq!(start_of_next_month(at("2025-12-31T23:59:59Z")), at("2026-01-01"));
        assert_eq!(start_of_day(mid), at("2024-02-15"));
        assert_eq!(rfc3339(at("2026-01-31T09:05:07Z")), "2026-01-31T09:05:07Z");
        assert_eq!(rfc3339(at("2026-01-31T09:05:07.9Z")), "2026-01-31T09:05:07.900Z");
    }
}
