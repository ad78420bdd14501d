//! The Usage page's range picker as report queries. The aggregates are kept per UTC hour and
//! reported per UTC day, so ranges are whole UTC days, both ends included, the way
//! `GET /api/usage` reads `from=2026-01-01&to=2026-01-07`.
import type { Bucket } from '../bindings/Bucket';

export type RangeKind = 'today' | '7d' | '30d' | 'month' | 'custom';

export const RANGES: ReadonlyArray<{ kind: RangeKind; label: string }> = [
  { kind: 'today', label: 'Today' },
  { kind: '7d', label: '7 days' },
  { kind: '30d', label: '30 days' },
  { kind: 'month', label: 'This month' },
  { kind: 'custom', label: 'Custom' },
];

/** What the picker holds: `from` and `to` (`YYYY-MM-DD`) are read for `custom` only. */
export type RangeChoice = { kind: RangeKind; from: string; to: string };

/** A range of whole UTC days and the bucket its charts use. */
export type DayRange = { from: string; to: string; days: number; bucket: Bucket };

/** A custom range that cannot be asked for, and the field to blame. */
export type RangeError = { field: 'from' | 'to'; message: string };

const DAY_MS = 86_400_000;
/** The longest range the server reports (ten years of days). */
export const MAX_DAYS = 3660;
/** The longest range it reports by the hour. */
export const MAX_HOURLY_DAYS = 31;

/** The UTC day of an instant, `YYYY-MM-DD`. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Midnight UTC of a `YYYY-MM-DD` day, or `null` when it is not one. */
export function dayStart(day: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return null;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return Number.isNaN(ms) || utcDay(ms) !== day ? null : ms;
}

function plusDays(day: string, days: number): string {
  return utcDay((dayStart(day) ?? 0) + days * DAY_MS);
}

/** Days from `from` to `to`, both counted. */
export function daysInRange(from: string, to: string): number {
  return Math.round(((dayStart(to) ?? 0) - (dayStart(from) ?? 0)) / DAY_MS) + 1;
}

/**
 * The days a choice covers at `now`. A single day is charted by the hour, longer ranges by
 * the day.
 */
export function resolveRange(choice: RangeChoice, now: number): DayRange | RangeError {
  const today = utcDay(now);
  let from: string;
  let to = today;
  switch (choice.kind) {
    case 'today':
      from = today;
      break;
    case '7d':
      from = plusDays(today, -6);
      break;
    case '30d':
      from = plusDays(today, -29);
      break;
    case 'month':
      from = `${today.slice(0, 8)}01`;
      break;
    case 'custom': {
      if (choice.from.trim() === '') return { field: 'from', message: 'Pick the first day' };
      if (choice.to.trim() === '') return { field: 'to', message: 'Pick the last day' };
      if (dayStart(choice.from) === null) return { field: 'from', message: 'Enter a day as YYYY-MM-DD' };
      if (dayStart(choice.to) === null) return { field: 'to', message: 'Enter a day as YYYY-MM-DD' };
      from = choice.from;
      to = choice.to;
      if (from > to) return { field: 'to', message: 'The last day is before the first' };
      if (daysInRange(from, to) > MAX_DAYS) {
        return { field: 'from', message: `At most ${MAX_DAYS.toLocaleString('en-US')} days: pick a later first day` };
      }
      break;
    }
  }
  const days = daysInRange(from, to);
  return { from, to, days, bucket: days === 1 ? 'hour' : 'day' };
}

export function isRangeError(value: DayRange | RangeError): value is RangeError {
  return 'field' in value;
}

/**
 * The same days by the hour, for requests and fallbacks per hour; `null` past
 * [`MAX_HOURLY_DAYS`], where the server reports by the day only.
 */
export function hourlyRange(range: DayRange): DayRange | null {
  return range.days <= MAX_HOURLY_DAYS ? { ...range, bucket: 'hour' } : null;
}

/** A bucket's start for people, in UTC as the aggregates are: `2026-02-01` or `2026-02-01 14:00`. */
export function formatBucket(ms: number, bucket: Bucket): string {
  const iso = new Date(ms).toISOString();
  return bucket === 'day' ? iso.slice(0, 10) : `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
}

/** An instant in UTC: `2026-02-01 00:00 UTC`. */
export function formatUtc(ms: number): string {
  return `${formatBucket(ms, 'hour')} UTC`;
}

/** A time axis tick, in UTC: a day's start as `11-25`, any other hour as `06:00`. */
export function timeTick(ms: number): string {
  const iso = new Date(ms).toISOString();
  return iso.slice(11, 16) === '00:00' ? iso.slice(5, 10) : iso.slice(11, 16);
}
