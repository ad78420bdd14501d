//! The text forms of "come back later": the exact spellings upstreams put in `Retry-After`,
//! `retry-after-ms`, `x-ratelimit-reset-*` and `anthropic-ratelimit-*-reset`.
//!
//! Invariants: every value round-trips through the core's parser
//! (`switchyard_core::outcome::retry_after`) to the same duration at millisecond precision, and
//! nothing here reads a clock: absolute forms take the instant from the caller.

use std::time::{Duration, UNIX_EPOCH};

use switchyard_core::UnixMillis;

const NANOS_PER_SECOND: u128 = 1_000_000_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
const NANOS_PER_MICRO: u128 = 1_000;

/// Seconds with as many decimals as needed: `2`, `1.5`, `0.001`.
pub(super) fn decimal_seconds(d: Duration) -> String {
    decimal(d.as_nanos(), NANOS_PER_SECOND)
}

/// Milliseconds with as many decimals as needed: `1500`, `0.25`.
pub(super) fn decimal_millis(d: Duration) -> String {
    decimal(d.as_nanos(), NANOS_PER_MILLI)
}

/// RFC 9110's preferred HTTP-date (IMF-fixdate), whole seconds.
pub(super) fn http_date(at: UnixMillis) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(at.0))
}

/// Go's `time.Duration.String()`, which is what OpenAI's rate-limit reset headers carry:
/// `0s`, `850ms`, `1.5s`, `6m0s`, `1h2m3s`.
pub(super) fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < NANOS_PER_MICRO {
        return format!("{nanos}ns");
    }
    if nanos < NANOS_PER_MILLI {
        return format!("{}µs", decimal(nanos, NANOS_PER_MICRO));
    }
    if nanos < NANOS_PER_SECOND {
        return format!("{}ms", decimal(nanos, NANOS_PER_MILLI));
    }
    let secs = d.as_secs();
    let (hours, minutes) = (secs / 3600, secs / 60 % 60);
    let seconds = decimal(
        u128::from(secs % 60) * NANOS_PER_SECOND + u128::from(d.subsec_nanos()),
        NANOS_PER_SECOND,
    );
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// RFC 3339 in UTC, as Anthropic sends it: `2025-01-02T03:04:05Z`, with milliseconds only when
/// there are some.
pub(super) fn rfc3339(at: UnixMillis) -> String {
    switchyard_core::calendar::rfc3339(at)
}

/// `value / unit` in decimal with trailing fraction zeros trimmed.
fn decimal(value: u128, unit: u128) -> String {
    let (whole, fraction) = (value / unit, value % unit);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue};
    use switchyard_core::outcome::retry_after;

    use super::*;

    const NOW: UnixMillis = UnixMillis(1_735_689_600_000); // 2025-01-01T00:00:00Z

    fn parsed(name: &'static str, value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(name), HeaderValue::from_str(value).unwrap());
        retry_after(&headers, NOW)
    }

    #[test]
    fn go_durations_are_spelled_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(500), "500ns"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_nanos(2500), "2.5µs"),
            (Duration::from_millis(17), "17ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(7660), "7.66s"),
            (Duration::from_secs(360), "6m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
            (Duration::from_secs(7200), "2h0m0s"),
        ];
        for (d, text) in cases {
            assert_eq!(go_duration(d), text, "{d:?}");
        }
    }

    #[test]
    fn decimals_trim_trailing_zeros_only() {
        assert_eq!(decimal_seconds(Duration::from_secs(2)), "2");
        assert_eq!(decimal_seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(decimal_seconds(Duration::from_millis(1)), "0.001");
        assert_eq!(decimal_millis(Duration::from_millis(1500)), "1500");
        assert_eq!(decimal_millis(Duration::from_micros(250)), "0.25");
    }

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(UnixMillis(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(NOW), "2025-01-01T00:00:00Z");
        assert_eq!(rfc3339(UnixMillis(951_782_400_000 + 3_723_004)), "2000-02-29T01:02:03.004Z");
    }

    #[test]
    fn every_form_round_trips_through_the_core_parser() {
        let wait = Duration::from_millis(90_500);
        assert_eq!(parsed("retry-after", &decimal_seconds(wait)), Some(wait));
        assert_eq!(parsed("retry-after-ms", &decimal_millis(wait)), Some(wait));
        assert_eq!(parsed("x-ratelimit-reset-requests", &go_duration(wait)), Some(wait));
        assert_eq!(parsed("x-ratelimit-reset-tokens", &go_duration(wait)), Some(wait));
        let at = NOW.plus(Duration::from_secs(30));
        assert_eq!(parsed("retry-after", &http_date(at)), Some(Duration::from_secs(30)));
        assert_eq!(
            parsed("anthropic-ratelimit-requests-reset", &rfc3339(NOW.plus(wait))),
            Some(wait)
        );
    }
}
