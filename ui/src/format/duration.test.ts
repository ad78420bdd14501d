import { describe, expect, it } from 'vitest';
import { formatAgo, formatCountdown, formatLatency, formatSetting, remainingAt } from './duration';

describe('formatCountdown', () => {
  it.each([
    [0, '0s'],
    [-5, '0s'],
    [1, '1s'],
    [999, '1s'],
    [1000, '1s'],
    [1001, '2s'],
    [59_000, '59s'],
    [60_000, '1m 00s'],
    [245_000, '4m 05s'],
    [3_600_000, '1h 00m'],
    [3_720_000, '1h 02m'],
    [2 * 86_400_000 + 3 * 3_600_000, '2d 03h'],
  ])('%d ms reads %s', (ms, text) => {
    expect(formatCountdown(ms)).toBe(text);
  });

  it('never shows NaN', () => {
    expect(formatCountdown(Number.NaN)).toBe('0s');
  });
});

describe('remainingAt', () => {
  it('subtracts the time since the read and stops at zero', () => {
    expect(remainingAt(10_000, 1_000, 4_000)).toBe(7_000);
    expect(remainingAt(10_000, 1_000, 20_000)).toBe(0);
  });
  it('does not grow when the clock is behind the read', () => {
    expect(remainingAt(10_000, 5_000, 4_000)).toBe(10_000);
  });
});

describe('formatSetting', () => {
  it.each([
    [250, '250 ms'],
    [10_000, '10 s'],
    [1_500, '1.5 s'],
    [300_000, '5 min'],
    [90_000, '1.5 min'],
    [3_600_000, '1 h'],
    [86_400_000, '1 d'],
  ])('%d ms reads %s', (ms, text) => {
    expect(formatSetting(ms)).toBe(text);
  });
});

describe('formatAgo', () => {
  it('says how long ago', () => {
    expect(formatAgo(10_000, 12_000)).toBe('just now');
    expect(formatAgo(0, 30_000)).toBe('30 s ago');
    expect(formatAgo(0, 5 * 60_000)).toBe('5 min ago');
  });
});

describe('latencies', () => {
  it('are milliseconds below a second, seconds with two decimals above', () => {
    expect(formatLatency(0.2)).toBe('< 1 ms');
    expect(formatLatency(84.6)).toBe('85 ms');
    expect(formatLatency(999)).toBe('999 ms');
    expect(formatLatency(1250)).toBe('1.25 s');
  });
});
