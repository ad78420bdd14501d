//! Upstream hints about how long to wait: `retry-after-ms`, `Retry-After`, `x-ratelimit-reset*`
//! and Anthropic's `anthropic-ratelimit-*-reset`.
//!
//! The job: turn whatever an upstream said about "come back later" into one [`Duration`] that
//! the cooldown and lockout layers can use instead of their own backoff formula (RESILIENCE.md
//! §4, §5, §8: "the proxy never hammers a provider that asked it to wait").
//!
//! Invariants:
//! - The result is always within `[0, MAX_RETRY_AFTER]`, at millisecond precision. Sub-millisecond
//!   remainders round *up*: waiting a hair too long is harmless, arriving a hair early is a
//!   wasted 429.
//! - Precedence is fixed: `retry-after-ms` (the most precise) beats `Retry-After` (the standard)
//!   beats the rate-limit reset headers (informational, and often about a limit other than the
//!   one that was hit). A source that is present but unparseable counts as absent, so a garbled
//!   header never hides a good one of lower precedence.
//! - Among several reset headers the longest wins: they describe different limits (requests,
//!   tokens, ...) and the request can go through only when all of them allow it.
//! - `now` comes only from the argument; the system clock is never read, so tests and replays are
//!   deterministic.
//! - Parsing is strict and exact: numbers are decimal text (no signs, exponents, `NaN` or `inf`),
//!   read without going through floating point so `0.3` seconds is exactly 300 ms.

use std::time::Duration;

use http::{HeaderMap, HeaderValue};

use crate::clock::UnixMillis;

/// The longest wait any upstream hint can impose.
pub const MAX_RETRY_AFTER: Duration = Duration::from_hours(1);

/// How long the upstream asked us to wait before a rate-limited request may go again, clamped
/// to [`MAX_RETRY_AFTER`]; `None` when it did not say (or said something unparseable). Every
/// source counts, rate-limit reset headers included.
pub fn retry_after(headers: &HeaderMap, now: UnixMillis) -> Option<Duration> {
    wait(headers, None, Resets::Count, now)
}

/// Whether the rate-limit reset headers count as a hint.
///
/// They describe when a rate-limit window refills, which says nothing about when an overloaded
/// or broken upstream recovers: OpenAI sends `x-ratelimit-reset-tokens: 6m0s` on every answer,
/// 503s included, and reading that as "come back in six minutes" would bench a model for a
/// blip (RESILIENCE.md §2 notes: "hints apply to their own kind").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resets {
    Count,
    Ignore,
}

/// The upstream's wait in precedence order: `retry-after-ms`, `Retry-After`, then the body's own
/// `body` delay (Gemini's `RetryInfo`, which stands for a `Retry-After`), then, when `resets`
/// says so, the rate-limit reset headers. Clamped to [`MAX_RETRY_AFTER`].
pub(crate) fn wait(
    headers: &HeaderMap,
    body: Option<Duration>,
    resets: Resets,
    now: UnixMillis,
) -> Option<Duration> {
    retry_after_ms(headers)
        .or_else(|| retry_after_standard(headers, now))
        .or(body)
        .or_else(|| match resets {
            Resets::Count => rate_limit_reset(headers, now),
            Resets::Ignore => None,
        })
        .map(|wait| wait.min(MAX_RETRY_AFTER))
}

/// Nanoseconds per unit, for turning a [`Decimal`] of that unit into time.
const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// Plain numbers in a reset header above these are absolute instants, not waits: 1e9 seconds is
/// 2001 as an epoch and 31 years as a delay, so nobody means the delay.
const EPOCH_MILLIS_ABOVE: u64 = 1_000_000_000_000;
const EPOCH_SECONDS_ABOVE: u64 = 1_000_000_000;

/// `retry-after-ms`: milliseconds, integer or fractional (`OpenAI`, Azure). Several copies of the
/// header are a broken upstream; the longest parseable one is honoured.
fn retry_after_ms(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get_all("retry-after-ms")
        .iter()
        .filter_map(|value| Decimal::parse(text(value)?))
        .map(|ms| ms.duration(NANOS_PER_MILLI))
        .max()
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Fractional seconds are not in
/// the RFC but some upstreams send them, and they are unambiguous.
fn retry_after_standard(headers: &HeaderMap, now: UnixMillis) -> Option<Duration> {
    headers
        .get_all(http::header::RETRY_AFTER)
        .iter()
        .filter_map(|value| {
            let value = text(value)?;
            match Decimal::parse(value) {
                Some(seconds) => Some(seconds.duration(NANOS_PER_SECOND)),
                None => http_date(value).map(|at| at.since(now)),
            }
        })
        .max()
}

/// The longest wait among every rate-limit reset header present.
fn rate_limit_reset(headers: &HeaderMap, now: UnixMillis) -> Option<Duration> {
    headers
        .iter()
        .filter(|(name, _)| is_reset_header(name.as_str()))
        .filter_map(|(_, value)| reset_value(text(value)?, now))
        .max()
}

/// `x-ratelimit-reset`, `-requests`, `-tokens` and any future sibling; Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens,unified}-reset`.
/// `HeaderName`s are always lower case, so plain comparisons suffice.
fn is_reset_header(name: &str) -> bool {
    name.starts_with("x-ratelimit-reset")
        || (name.starts_with("anthropic-ratelimit-") && name.ends_with("-reset"))
}

/// One reset value, in any of the forms upstreams are known to use. The forms cannot be confused
/// with one another (a timestamp has dashes, a Go duration a unit, a number neither), so all
/// reset headers accept all of them.
pub(crate) fn reset_value(value: &str, now: UnixMillis) -> Option<Duration> {
    if let Some(at) = rfc3339(value) {
        return Some(at.since(now));
    }
    if let Some(number) = Decimal::parse(value) {
        let as_millis = number.millis(NANOS_PER_MILLI);
        return Some(if as_millis > EPOCH_MILLIS_ABOVE {
            UnixMillis(as_millis).since(now)
        } else if as_millis > EPOCH_SECONDS_ABOVE {
            UnixMillis(number.millis(NANOS_PER_SECOND)).since(now)
        } else {
            number.duration(NANOS_PER_SECOND)
        });
    }
    go_duration(value)
}

/// The header's text, trimmed. Raw bytes rather than `to_str` so a Go duration spelled with `µs`
/// (UTF-8, which `to_str` rejects) still parses.
fn text(value: &HeaderValue) -> Option<&str> {
    std::str::from_utf8(value.as_bytes()).ok().map(str::trim)
}

/// An IMF-fixdate, RFC 850 or asctime date (everything RFC 9110 asks a recipient to accept).
fn http_date(value: &str) -> Option<UnixMillis> {
    httpdate::parse_http_date(value).ok().map(UnixMillis::from_system_time)
}

/// A non-negative decimal number, held exactly in billionths so that no value that fits in a
/// header loses precision on its way to milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Decimal(u128);

impl Decimal {
    const SCALE: u128 = 1_000_000_000;
    const FRACTION_DIGITS: usize = 9;

    /// `digits ["." digits]`, nothing else: no sign, no exponent, no `NaN`/`inf`, no empty
    /// parts. Absurdly large values saturate (they end up clamped anyway); fraction digits past
    /// the ninth only round up.
    fn parse(s: &str) -> Option<Self> {
        let (whole, fraction) = match s.split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (s, None),
        };
        if !all_digits(whole) || fraction.is_some_and(|f| !all_digits(f)) {
            return None;
        }
        let whole = whole.bytes().fold(0u128, |n, d| n.saturating_mul(10).saturating_add(digit(d)));
        let fraction = fraction.unwrap_or("");
        let (kept, rest) = fraction.split_at(fraction.len().min(Self::FRACTION_DIGITS));
        let mut billionths = kept.bytes().fold(0u128, |n, d| n * 10 + digit(d));
        for _ in kept.len()..Self::FRACTION_DIGITS {
            billionths *= 10;
        }
        // Digits beyond the ninth: round up, so a wait is never shortened.
        let sticky = u128::from(rest.bytes().any(|d| d != b'0'));
        Some(Self(whole.saturating_mul(Self::SCALE).saturating_add(billionths + sticky)))
    }

    /// This many units of `nanos_per_unit` nanoseconds, in whole milliseconds rounded up.
    fn millis(self, nanos_per_unit: u128) -> u64 {
        Self::nanos_to_millis(self.scaled_nanos(nanos_per_unit))
    }

    fn duration(self, nanos_per_unit: u128) -> Duration {
        Duration::from_millis(self.millis(nanos_per_unit))
    }

    /// The value in nanoseconds times [`Self::SCALE`]; exact, saturating.
    fn scaled_nanos(self, nanos_per_unit: u128) -> u128 {
        self.0.saturating_mul(nanos_per_unit)
    }

    fn nanos_to_millis(scaled_nanos: u128) -> u64 {
        let millis = scaled_nanos.div_ceil(Self::SCALE * NANOS_PER_MILLI);
        u64::try_from(millis).unwrap_or(u64::MAX)
    }
}

/// A Go `time.Duration` string as `OpenAI` sends it: `1s`, `6m0s`, `20ms`, `1h2m3.5s`, `0.5s`.
/// One or more `number unit` pairs; summed exactly, rounded up to the millisecond once.
fn go_duration(s: &str) -> Option<Duration> {
    // Longest spelling first, so `ms` is not read as `m` followed by garbage.
    const UNITS: [(&str, u128); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("µs", 1_000), // U+00B5 MICRO SIGN
        ("μs", 1_000), // U+03BC GREEK SMALL LETTER MU
        ("ms", NANOS_PER_MILLI),
        ("s", NANOS_PER_SECOND),
        ("m", 60 * NANOS_PER_SECOND),
        ("h", 3600 * NANOS_PER_SECOND),
    ];
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total = 0u128;
    while !rest.is_empty() {
        let number_len =
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let number = Decimal::parse(number)?;
        let &(unit, nanos) = UNITS.iter().find(|(unit, _)| tail.starts_with(unit))?;
        total = total.saturating_add(number.scaled_nanos(nanos));
        rest = &tail[unit.len()..];
    }
    Some(Duration::from_millis(Decimal::nanos_to_millis(total)))
}

/// A strict RFC 3339 `date-time`, as Anthropic sends its resets: `2026-11-29T18:20:12Z`,
/// optionally with fractional seconds and a numeric offset. Instants before the epoch become the
/// epoch (they are in the past either way).
fn rfc3339(s: &str) -> Option<UnixMillis> {
    let b = s.as_bytes();
    // "YYYY-MM-DDTHH:MM:SS" is 19 bytes; the zone needs at least one more. All ASCII, which also
    // makes every byte offset below a valid place to slice.
    if !s.is_ascii()
        || b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let year = fixed_digits(&s[0..4])?;
    let month = fixed_digits(&s[5..7])?;
    let day = fixed_digits(&s[8..10])?;
    let hour = fixed_digits(&s[11..13])?;
    let minute = fixed_digits(&s[14..16])?;

    let zone_at = s[19..].find(['Z', 'z', '+', '-']).map(|i| i + 19)?;
    // Seconds are exactly two digits, then an optional fraction of at least one digit.
    let seconds_text = &s[17..zone_at];
    let seconds_ok = match seconds_text.split_once('.') {
        Some((whole, fraction)) => whole.len() == 2 && !fraction.is_empty(),
        None => seconds_text.len() == 2,
    };
    let seconds = seconds_ok.then(|| Decimal::parse(seconds_text)).flatten()?;

    let offset_minutes: i64 = match &s[zone_at..] {
        "Z" | "z" => 0,
        zone => {
            let zb = zone.as_bytes();
            if zb.len() != 6 || zb[3] != b':' {
                return None;
            }
            let (hours, minutes) = (fixed_digits(&zone[1..3])?, fixed_digits(&zone[4..6])?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let magnitude = i64::from(hours * 60 + minutes);
            if zb[0] == b'-' { -magnitude } else { magnitude }
        }
    };

    // RFC 3339 allows second 60 (a leap second); it is read as the first instant of the next
    // minute, which is what a POSIX clock does with it anyway.
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || seconds.0 >= 61 * Decimal::SCALE
    {
        return None;
    }

    let days = days_from_civil(i64::from(year), i64::from(month), i64::from(day));
    let local_seconds = days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60;
    let utc_seconds = local_seconds - offset_minutes * 60;
    let Ok(utc_seconds) = u64::try_from(utc_seconds) else {
        return Some(UnixMillis::EPOCH);
    };
    Some(UnixMillis(utc_seconds * 1000).plus(seconds.duration(NANOS_PER_SECOND)))
}

/// Exactly `s.len()` ASCII digits (the callers pass 2 or 4), as a number.
fn fixed_digits(s: &str) -> Option<u32> {
    all_digits(s).then(|| s.bytes().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn digit(d: u8) -> u128 {
    u128::from(d - b'0')
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29T18:20:00Z, a fixed "now" for every test.
    const NOW: UnixMillis = UnixMillis(1_795_976_400_000);

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(name, HeaderValue::from_str(value).expect("test header value is valid"));
        }
        map
    }

    fn wait(pairs: &[(&'static str, &str)]) -> Option<Duration> {
        retry_after(&headers(pairs), NOW)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    const MAX: Option<Duration> = Some(MAX_RETRY_AFTER);

    #[test]
    fn the_fixed_now_is_the_instant_its_comment_names() {
        assert_eq!(rfc3339("2026-11-29T18:20:00Z"), Some(NOW));
        assert_eq!(http_date("Sun, 29 Nov 2026 18:20:00 GMT"), Some(NOW));
    }

    #[test]
    fn no_hint_headers_means_no_hint() {
        assert_eq!(wait(&[]), None);
        assert_eq!(
            wait(&[("content-type", "application/json"), ("x-ratelimit-limit", "60")]),
            None
        );
    }

    // retry-after-ms

    #[test]
    fn retry_after_ms_is_read_as_integer_milliseconds() {
        assert_eq!(wait(&[("retry-after-ms", "1500")]), Some(ms(1500)));
        assert_eq!(wait(&[("retry-after-ms", "0")]), Some(ms(0)));
    }

    #[test]
    fn retry_after_ms_fractions_round_up_to_the_next_millisecond() {
        assert_eq!(wait(&[("retry-after-ms", "1500.25")]), Some(ms(1501)));
        assert_eq!(wait(&[("retry-after-ms", "1500.000")]), Some(ms(1500)));
        assert_eq!(wait(&[("retry-after-ms", "0.0000000001")]), Some(ms(1)));
    }

    #[test]
    fn retry_after_ms_tolerates_surrounding_whitespace() {
        assert_eq!(wait(&[("retry-after-ms", " 250 ")]), Some(ms(250)));
    }

    // Retry-After

    #[test]
    fn retry_after_integer_seconds_are_honoured() {
        assert_eq!(wait(&[("retry-after", "120")]), Some(secs(120)));
        assert_eq!(wait(&[("Retry-After", "0")]), Some(ms(0)));
    }

    #[test]
    fn retry_after_fractional_seconds_are_exact_to_the_millisecond() {
        assert_eq!(wait(&[("retry-after", "1.5")]), Some(ms(1500)));
        assert_eq!(wait(&[("retry-after", "0.3")]), Some(ms(300)));
        assert_eq!(wait(&[("retry-after", "2.0001")]), Some(ms(2001)));
    }

    #[test]
    fn retry_after_imf_fixdate_is_the_time_until_that_date() {
        assert_eq!(wait(&[("retry-after", "Sun, 29 Nov 2026 18:22:00 GMT")]), Some(secs(120)));
    }

    #[test]
    fn retry_after_obsolete_rfc850_and_asctime_dates_are_accepted() {
        assert_eq!(wait(&[("retry-after", "Sunday, 29-Nov-26 18:21:00 GMT")]), Some(secs(60)));
        assert_eq!(wait(&[("retry-after", "Sun Nov 29 18:20:30 2026")]), Some(secs(30)));
    }

    #[test]
    fn retry_after_date_in_the_past_means_no_wait() {
        assert_eq!(wait(&[("retry-after", "Sun, 29 Nov 2026 18:00:00 GMT")]), Some(ms(0)));
        assert_eq!(wait(&[("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT")]), Some(ms(0)));
    }

    #[test]
    fn retry_after_date_is_measured_from_the_given_now_not_the_system_clock() {
        let map = headers(&[("retry-after", "Sun, 29 Nov 2026 18:22:00 GMT")]);
        let later = NOW.plus(Duration::from_secs(100));
        assert_eq!(retry_after(&map, later), Some(secs(20)));
    }

    // Rate-limit reset headers

    #[test]
    fn openai_go_durations_in_reset_headers_are_parsed() {
        for (value, expected) in [
            ("1s", 1000),
            ("6m0s", 360_000),
            ("20ms", 20),
            ("2m3.5s", 123_500),
            ("0h0m3s", 3000),
            ("0.5s", 500),
            ("2m", 120_000),
            ("0.5h", 1_800_000),
            ("1s500ms", 1500),
            ("1500us", 2),
            ("1500µs", 2),
            ("2000000ns", 2),
            ("0s", 0),
        ] {
            assert_eq!(
                wait(&[("x-ratelimit-reset-requests", value)]),
                Some(ms(expected)),
                "{value}"
            );
        }
    }

    #[test]
    fn go_durations_past_an_hour_parse_exactly_and_are_then_clamped() {
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
        assert_eq!(wait(&[("x-ratelimit-reset-tokens", "1h2m3.5s")]), MAX);
    }

    #[test]
    fn go_durations_reject_missing_units_and_numbers() {
        for bad in ["", "5", "s", "1x", "1s2", "1.s", "-1s", "1 s", "1S", "1sms"] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn go_duration_segments_are_summed_before_rounding() {
        // 0.4 ms + 0.4 ms is one millisecond rounded up, not two.
        assert_eq!(go_duration("400us400us"), Some(Duration::from_millis(1)));
    }

    #[test]
    fn plain_numbers_in_reset_headers_are_delta_seconds() {
        assert_eq!(wait(&[("x-ratelimit-reset", "30")]), Some(secs(30)));
        assert_eq!(wait(&[("x-ratelimit-reset-tokens", "0.25")]), Some(ms(250)));
    }

    #[test]
    fn large_numbers_in_reset_headers_are_epoch_seconds() {
        let in_a_minute = (NOW.0 / 1000 + 60).to_string();
        assert_eq!(wait(&[("x-ratelimit-reset", &in_a_minute)]), Some(secs(60)));
        let fractional = format!("{}.5", NOW.0 / 1000 + 60);
        assert_eq!(wait(&[("x-ratelimit-reset", &fractional)]), Some(ms(60_500)));
    }

    #[test]
    fn very_large_numbers_in_reset_headers_are_epoch_milliseconds() {
        let soon = (NOW.0 + 1234).to_string();
        assert_eq!(wait(&[("x-ratelimit-reset", &soon)]), Some(ms(1234)));
    }

    #[test]
    fn epoch_resets_in_the_past_mean_no_wait() {
        assert_eq!(wait(&[("x-ratelimit-reset", "1700000000")]), Some(ms(0)));
        assert_eq!(wait(&[("x-ratelimit-reset", "1700000000000")]), Some(ms(0)));
    }

    #[test]
    fn the_longest_of_several_reset_headers_wins() {
        let pairs = [
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
            ("x-ratelimit-reset", "20"),
        ];
        assert_eq!(wait(&pairs), Some(secs(360)));
    }

    #[test]
    fn any_header_named_x_ratelimit_reset_something_counts() {
        assert_eq!(wait(&[("x-ratelimit-reset-input-tokens", "45s")]), Some(secs(45)));
    }

    #[test]
    fn anthropic_rfc3339_resets_are_the_time_until_that_instant() {
        assert_eq!(
            wait(&[("anthropic-ratelimit-requests-reset", "2026-11-29T18:20:12Z")]),
            Some(secs(12))
        );
    }

    #[test]
    fn anthropic_resets_accept_fractions_and_offsets() {
        let cases = [
            ("2026-11-29T18:20:12.5Z", 12_500),
            ("2026-11-29T18:20:12.0001Z", 12_001),
            ("2026-11-29T19:20:12+01:00", 12_000),
            ("2026-11-29T17:50:12-00:30", 12_000),
            ("2026-11-29t18:20:12z", 12_000),
        ];
        for (value, expected) in cases {
            assert_eq!(
                wait(&[("anthropic-ratelimit-tokens-reset", value)]),
                Some(ms(expected)),
                "{value}"
            );
        }
    }

    #[test]
    fn anthropic_and_openai_resets_are_pooled_and_the_longest_wins() {
        let pairs = [
            ("anthropic-ratelimit-requests-reset", "2026-11-29T18:20:05Z"),
            ("anthropic-ratelimit-output-tokens-reset", "2026-11-29T18:21:00Z"),
            ("x-ratelimit-reset-requests", "10s"),
        ];
        assert_eq!(wait(&pairs), Some(secs(60)));
    }

    #[test]
    fn anthropic_unified_reset_as_epoch_seconds_is_understood() {
        let reset = (NOW.0 / 1000 + 90).to_string();
        assert_eq!(wait(&[("anthropic-ratelimit-unified-reset", &reset)]), Some(secs(90)));
    }

    #[test]
    fn anthropic_headers_that_are_not_resets_are_ignored() {
        let pairs = [
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-limit", "50"),
        ];
        assert_eq!(wait(&pairs), None);
    }

    #[test]
    fn anthropic_reset_in_the_past_means_no_wait() {
        assert_eq!(
            wait(&[("anthropic-ratelimit-requests-reset", "2026-11-29T18:19:00Z")]),
            Some(ms(0))
        );
        assert_eq!(
            wait(&[("anthropic-ratelimit-requests-reset", "1969-12-31T23:59:59Z")]),
            Some(ms(0))
        );
    }

    // Precedence

    #[test]
    fn retry_after_ms_beats_retry_after_and_resets() {
        let pairs = [
            ("retry-after-ms", "1500"),
            ("retry-after", "120"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ];
        assert_eq!(wait(&pairs), Some(ms(1500)));
    }

    #[test]
    fn retry_after_beats_resets_even_when_shorter() {
        let pairs = [("retry-after", "2"), ("x-ratelimit-reset-tokens", "6m0s")];
        assert_eq!(wait(&pairs), Some(secs(2)));
    }

    #[test]
    fn a_past_retry_after_date_still_takes_precedence_over_resets() {
        let pairs = [("retry-after", "Sun, 29 Nov 2026 18:00:00 GMT"), ("x-ratelimit-reset", "30")];
        assert_eq!(wait(&pairs), Some(ms(0)));
    }

    #[test]
    fn unparseable_retry_after_ms_falls_through_to_retry_after() {
        for garbage in ["soon", "-1500", "NaN", "inf", "1e3", "", "1.", ".5", "1,5", "+10", "0x10"]
        {
            let pairs = [("retry-after-ms", garbage), ("retry-after", "7")];
            assert_eq!(wait(&pairs), Some(secs(7)), "{garbage:?}");
        }
    }

    #[test]
    fn unparseable_retry_after_falls_through_to_resets() {
        for garbage in
            ["-5", "NaN", "Infinity", "tomorrow", "1.5.2", "Sun, 32 Nov 2026 18:00:00 GMT"]
        {
            let pairs = [("retry-after", garbage), ("x-ratelimit-reset-requests", "3s")];
            assert_eq!(wait(&pairs), Some(secs(3)), "{garbage:?}");
        }
    }

    #[test]
    fn unparseable_reset_headers_are_skipped_and_the_rest_still_count() {
        let pairs = [
            ("x-ratelimit-reset-requests", "-1s"),
            ("x-ratelimit-reset-tokens", "NaN"),
            ("x-ratelimit-reset", "5x"),
            ("anthropic-ratelimit-tokens-reset", "2026-13-01T00:00:00Z"),
            ("x-ratelimit-reset-input-tokens", "4s"),
        ];
        assert_eq!(wait(&pairs), Some(secs(4)));
    }

    #[test]
    fn only_garbage_means_no_hint() {
        let pairs = [
            ("retry-after-ms", "-1"),
            ("retry-after", "later"),
            ("x-ratelimit-reset", "inf"),
            ("anthropic-ratelimit-requests-reset", "not a date"),
        ];
        assert_eq!(wait(&pairs), None);
    }

    #[test]
    fn duplicate_retry_after_headers_honour_the_longest_parseable_one() {
        let pairs = [("retry-after", "5"), ("retry-after", "nonsense"), ("retry-after", "9")];
        assert_eq!(wait(&pairs), Some(secs(9)));
    }

    // Clamping

    #[test]
    fn every_source_is_clamped_to_one_hour() {
        assert_eq!(wait(&[("retry-after-ms", "86400000")]), MAX);
        assert_eq!(wait(&[("retry-after", "86400")]), MAX);
        assert_eq!(wait(&[("retry-after", "Fri, 01 Jan 2100 00:00:00 GMT")]), MAX);
        assert_eq!(wait(&[("x-ratelimit-reset-tokens", "25h")]), MAX);
        assert_eq!(wait(&[("x-ratelimit-reset", "999999999")]), MAX);
        assert_eq!(wait(&[("anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z")]), MAX);
    }

    #[test]
    fn a_wait_of_exactly_one_hour_is_kept() {
        assert_eq!(wait(&[("retry-after", "3600")]), MAX);
        assert_eq!(wait(&[("retry-after-ms", "3599999")]), Some(ms(3_599_999)));
    }

    #[test]
    fn absurdly_long_numbers_saturate_and_clamp_instead_of_overflowing() {
        let huge = "9".repeat(60);
        assert_eq!(wait(&[("retry-after-ms", &huge)]), MAX);
        assert_eq!(wait(&[("retry-after", &huge)]), MAX);
        assert_eq!(wait(&[("x-ratelimit-reset", &huge)]), MAX);
        assert_eq!(wait(&[("x-ratelimit-reset", &format!("{huge}h{huge}m"))]), MAX);
    }

    // The RFC 3339 parser on its own

    #[test]
    fn rfc3339_parser_rejects_near_misses() {
        for bad in [
            "2026-11-29T18:20:12",       // no zone
            "2026-11-29 18:20:12Z",      // space instead of T
            "2026-11-29T18:20:12.Z",     // empty fraction
            "2026-11-29T18:20:1Z",       // one-digit seconds
            "2026-11-29T18:20:12+0100",  // offset without colon
            "2026-11-29T18:20:12+24:00", // offset hour out of range
            "2026-02-29T00:00:00Z",      // not a leap year
            "2026-11-31T00:00:00Z",      // November has 30 days
            "2026-11-29T24:00:00Z",      // hour 24
            "2026-11-29T18:60:00Z",      // minute 60
            "2026-11-29T18:20:61Z",      // second 61
            "2026-11-29T18:20:12ZZ",     // trailing junk
            "+2026-11-29T18:20:12Z",     // signed year
            "2026-1-29T18:20:12Z",       // one-digit month
        ] {
            assert_eq!(rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc3339_parser_knows_leap_years_and_leap_seconds() {
        assert_eq!(rfc3339("2028-02-29T00:00:00Z"), Some(UnixMillis(1_835_395_200_000)));
        assert_eq!(rfc3339("2000-02-29T00:00:00Z"), Some(UnixMillis(951_782_400_000)));
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(UnixMillis::EPOCH));
        assert_eq!(rfc3339("2016-12-31T23:59:60Z"), Some(UnixMillis(1_483_228_800_000)));
    }
}
