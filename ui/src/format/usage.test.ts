import { describe, expect, it } from 'vitest';
import type { UsageView } from '../bindings/UsageView';
import { describeTokens, formatCost, formatTokens } from './usage';

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
