import { describe, expect, it } from 'vitest';
import type { UsageView } from '../bindings/UsageView';
import { abbreviate, describeTokens, formatCost, formatDollars, formatTokens, formatUsdExact, nanodollarsToUsd, totalTokens } from './usage';

const usage: UsageView = {
  uncached_input: 1000,
  cache_read: 2000,
  cache_write: 500,
  output: 300,
  reasoning: 100,
  estimated: false,
};

describe('usage formatting', () => {
  it('sums every input bucket once and shows output beside it', () => {
    expect(formatTokens(usage)).toBe('3,500 → 300');
    expect(formatTokens({ ...usage, estimated: true })).toBe('~3,500 → 300');
    expect(formatTokens(null)).toBe('—');
    expect(describeTokens(usage)).toBe(
      '1000 uncached input, 2000 cache read, 500 cache write, 300 output (100 reasoning)',
    );
  });

  it('keeps a fraction of a cent visible without printing every nano-dollar', () => {
    expect(formatCost('0.008')).toBe('$0.008');
    expect(formatCost('0.000125')).toBe('$0.00012');
    expect(formatCost('1.5')).toBe('$1.50');
    expect(formatCost('12')).toBe('$12.00');
    expect(formatCost('0')).toBe('$0.00');
    expect(formatCost(null)).toBe('—');
  });
});

describe('usage units for charts', () => {
  it('turns exact nanodollars into dollars', () => {
    expect(nanodollarsToUsd(6_150_000)).toBe(0.00615);
    expect(nanodollarsToUsd(2_500_000_000)).toBe(2.5);
    expect(nanodollarsToUsd(0)).toBe(0);
  });

  it('counts every token once: the input buckets and output, reasoning being inside output', () => {
    expect(totalTokens({ uncached_input: 1000, cache_read: 2000, cache_write: 500, output: 300, reasoning: 100 })).toBe(3800);
  });

  it('abbreviates token counts for axes and legends, moving to the next unit when rounding reaches it', () => {
    expect(abbreviate(0)).toBe('0');
    expect(abbreviate(950)).toBe('950');
    expect(abbreviate(999.6)).toBe('1k');
    expect(abbreviate(1234)).toBe('1.2k');
    expect(abbreviate(12_345)).toBe('12k');
    expect(abbreviate(999_950)).toBe('1M');
    expect(abbreviate(3_400_000)).toBe('3.4M');
    expect(abbreviate(2_500_000_000)).toBe('2.5B');
    expect(abbreviate(2.5)).toBe('2.5');
  });

  it('shows dollars with cents, and two significant digits below a dollar', () => {
    expect(formatDollars(0)).toBe('$0');
    expect(formatDollars(0.25)).toBe('$0.25');
    expect(formatDollars(0.5)).toBe('$0.50');
    expect(formatDollars(0.01845)).toBe('$0.018');
    expect(formatDollars(12.5)).toBe('$12.50');
    expect(formatDollars(0.005)).toBe('$0.005');
    expect(formatDollars(0.00123)).toBe('$0.0012');
    expect(formatDollars(0.000000004)).toBe('$0.000000004');
    expect(formatDollars(1234)).toBe('$1.2k');
  });

  it('keeps every digit of a total the server sent', () => {
    expect(formatUsdExact('0.01845')).toBe('$0.01845');
    expect(formatUsdExact('12')).toBe('$12.00');
    expect(formatUsdExact('3.5')).toBe('$3.50');
  });
});
