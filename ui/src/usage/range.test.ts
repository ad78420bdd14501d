import { describe, expect, it } from 'vitest';
import { formatBucket, formatUtc, hourlyRange, resolveRange, timeTick, utcDay } from './range';

// 2026-02-10 23:30 UTC: late in the UTC day, whatever the machine's zone.
const NOW = Date.UTC(2026, 1, 10, 23, 30);
const custom = (from: string, to: string) => ({ kind: 'custom' as const, from, to });

describe('usage ranges', () => {
  it('are whole UTC days ending today, a single day by the hour', () => {
    expect(utcDay(NOW)).toBe('2026-02-10');
    expect(resolveRange({ kind: 'today', from: '', to: '' }, NOW)).toEqual({ from: '2026-02-10', to: '2026-02-10', days: 1, bucket: 'hour' });
    expect(resolveRange({ kind: '7d', from: '', to: '' }, NOW)).toEqual({ from: '2026-02-04', to: '2026-02-10', days: 7, bucket: 'day' });
    expect(resolveRange({ kind: '30d', from: '', to: '' }, NOW)).toEqual({ from: '2026-01-12', to: '2026-02-10', days: 30, bucket: 'day' });
    expect(resolveRange({ kind: 'month', from: '', to: '' }, NOW)).toEqual({ from: '2026-02-01', to: '2026-02-10', days: 10, bucket: 'day' });
  });

  it('this month on its first day is that day, by the hour', () => {
    expect(resolveRange({ kind: 'month', from: '', to: '' }, Date.UTC(2026, 2, 1, 0, 5))).toEqual({ from: '2026-03-01', to: '2026-03-01', days: 1, bucket: 'hour' });
  });

  it('take custom days as given, across a leap day', () => {
    expect(resolveRange(custom('2028-02-27', '2028-03-01'), NOW)).toEqual({ from: '2028-02-27', to: '2028-03-01', days: 4, bucket: 'day' });
    expect(resolveRange(custom('2026-01-05', '2026-01-05'), NOW)).toEqual({ from: '2026-01-05', to: '2026-01-05', days: 1, bucket: 'hour' });
  });

  it('refuse a custom range that cannot be asked for, naming the field', () => {
    expect(resolveRange(custom('', '2026-01-05'), NOW)).toEqual({ field: 'from', message: 'Pick the first day' });
    expect(resolveRange(custom('2026-01-05', ''), NOW)).toEqual({ field: 'to', message: 'Pick the last day' });
    expect(resolveRange(custom('2026-02-30', '2026-03-05'), NOW)).toEqual({ field: 'from', message: 'Enter a day as YYYY-MM-DD' });
    expect(resolveRange(custom('2026-03-05', '2026-03-01'), NOW)).toEqual({ field: 'to', message: 'The last day is before the first' });
    expect(resolveRange(custom('2010-01-01', '2026-01-01'), NOW)).toEqual({ field: 'from', message: 'At most 3,660 days: pick a later first day' });
  });

  it('are reported by the hour up to 31 days, by the day beyond', () => {
    const month = { from: '2026-01-01', to: '2026-01-31', days: 31, bucket: 'day' as const };
    expect(hourlyRange(month)).toEqual({ ...month, bucket: 'hour' });
    expect(hourlyRange({ ...month, to: '2026-02-01', days: 32 })).toBeNull();
  });

  it('name buckets and instants in UTC', () => {
    expect(formatBucket(Date.UTC(2026, 1, 3), 'day')).toBe('2026-02-03');
    expect(formatBucket(Date.UTC(2026, 1, 3, 14), 'hour')).toBe('2026-02-03 14:00');
    expect(formatUtc(Date.UTC(2026, 2, 1))).toBe('2026-03-01 00:00 UTC');
    expect(timeTick(Date.UTC(2026, 10, 25))).toBe('11-25');
    expect(timeTick(Date.UTC(2026, 10, 25, 6))).toBe('06:00');
  });
});
