import { describe, expect, it } from 'vitest';
import { point, report, series } from '../test/usageFixtures';
import { activityChart, alignPoints, COUNT_STEPS, dollarTicks, drawnValues, isEmptyChart, latencies, stackedChart, stackFromTop, topKeys } from './chart';

const dollars = (usd: number) => Math.round(usd * 1e9);

describe('stacked spend and tokens', () => {
  const byModel = report({
    buckets: 3,
    group_by: 'model',
    groups: [
      series('oa/gpt-4o', [point({ requests: 2, cost_nanodollars: dollars(0.5), uncached_input: 100, output: 20 }), point(), point({ requests: 1, cost_nanodollars: dollars(0.25), cache_read: 40 })]),
      series('an/claude', [point(), point({ requests: 1, cost_nanodollars: dollars(1), uncached_input: 10, cache_write: 5, output: 5, reasoning: 2 }), point()]),
      // Served, no price: tokens but no spend.
      series('local/llama', [point({ requests: 3, uncached_input: 900, output: 300, cost_unknown: 3 }), point(), point()]),
    ],
  });

  it('is one series per group, aligned with the buckets, in dollars, the largest spender first', () => {
    const spend = stackedChart(byModel, 'spend');
    expect(spend.x).toEqual(byModel.buckets);
    expect(spend.series).toEqual([
      { label: 'an/claude', values: [0, 1, 0] },
      { label: 'oa/gpt-4o', values: [0.5, 0, 0.25] },
    ]);
  });

  it('counts tokens once per bucket, reasoning inside output, and keeps groups without a price', () => {
    const tokens = stackedChart(byModel, 'tokens');
    expect(tokens.series).toEqual([
      { label: 'local/llama', values: [1200, 0, 0] },
      { label: 'oa/gpt-4o', values: [120, 0, 40] },
      { label: 'an/claude', values: [0, 20, 0] },
    ]);
  });

  it('is one series of everything when the report has no groups', () => {
    const plain = report({ buckets: 2, totals: [point({ cost_nanodollars: dollars(2) }), point()] });
    expect(stackedChart(plain, 'spend').series).toEqual([{ label: 'All', values: [2, 0] }]);
  });

  it('folds the smallest groups into one Other series past the most it shows', () => {
    const many = report({
      buckets: 1,
      group_by: 'provider',
      groups: [1, 2, 3, 4].map((n) => series(`p${n}`, [point({ cost_nanodollars: dollars(n) })])),
    });
    expect(stackedChart(many, 'spend', 3).series).toEqual([
      { label: 'p4', values: [4] },
      { label: 'p3', values: [3] },
      { label: 'Other (2)', values: [3] },
    ]);
  });

  it('fills buckets a series has no point for with zeros', () => {
    const buckets = [0, 1, 2, 3];
    expect(alignPoints(buckets, [point({ requests: 5 }), point({ requests: 1 })], (p) => p.requests)).toEqual([5, 1, 0, 0]);
    expect(alignPoints(buckets, undefined, (p) => p.requests)).toEqual([0, 0, 0, 0]);
  });

  it('has nothing to draw when no group spent anything', () => {
    const free = report({ buckets: 2, group_by: 'model', groups: [series('local/llama', [point({ requests: 1, uncached_input: 5 }), point()])] });
    expect(stackedChart(free, 'spend').series).toEqual([]);
    expect(isEmptyChart(stackedChart(free, 'spend'))).toBe(true);
    expect(isEmptyChart(stackedChart(free, 'tokens'))).toBe(false);
  });
});

describe('stacking', () => {
  it('draws the first series on top: each line is itself plus every series under it', () => {
    expect(stackFromTop([[1, 0, 2], [3, 4, 0], [5, 0, 0]])).toEqual([
      [9, 4, 2],
      [8, 4, 0],
      [5, 0, 0],
    ]);
    expect(stackFromTop([])).toEqual([]);
  });

  it('draws no bar where a series has nothing, stacked or not', () => {
    // The series below shows through where the top one has nothing.
    expect(drawnValues([[1, 0, 2], [3, 4, 0]], true)).toEqual([
      [4, null, 2],
      [3, 4, null],
    ]);
    expect(drawnValues([[1, 0, 2], [3, 4, 0]], false)).toEqual([
      [1, null, 2],
      [3, 4, null],
    ]);
  });

  it('leaves its input as it was', () => {
    const values = [[1], [2]];
    stackFromTop(values);
    expect(values).toEqual([[1], [2]]);
  });
});

describe('requests and fallbacks', () => {
  it('are per bucket from the totals, fallbacks apart', () => {
    const hourly = report({ buckets: 3, width: 3_600_000, totals: [point({ requests: 4, fallbacks: 1 }), point(), point({ requests: 2, fallbacks: 2 })] });
    expect(activityChart(hourly)).toEqual({
      x: hourly.buckets,
      series: [
        { label: 'Requests', values: [4, 0, 2] },
        { label: 'Fallbacks', values: [1, 0, 2] },
      ],
    });
  });
});

describe('time to first token per provider', () => {
  it('lists the providers that served a streamed request, by name, with p50 and p95 over the range', () => {
    const byProvider = report({
      buckets: 2,
      group_by: 'provider',
      groups: [
        series('zeta', [point({ requests: 1, ttft_samples: 1, ttft_p50_ms: 300, ttft_p95_ms: 300 }), point()]),
        series('alpha', [point(), point({ requests: 4, ttft_samples: 4, ttft_p50_ms: 120, ttft_p95_ms: 410 })]),
        series('batch', [point({ requests: 9 }), point()]),
      ],
    });
    expect(latencies(byProvider)).toEqual([
      { label: 'alpha', p50: 120, p95: 410, samples: 4 },
      { label: 'zeta', p50: 300, p95: 300, samples: 1 },
    ]);
  });
});

describe('top keys by spend', () => {
  const byKey = report({
    buckets: 1,
    group_by: 'key',
    groups: [
      series('editor', [point({ requests: 10, cost_nanodollars: dollars(1) })], 'key_1'),
      series('agent', [point({ requests: 2, cost_nanodollars: dollars(4) })], 'key_2'),
      series('(no key)', [point({ requests: 7 })], null),
      series('idle', [point()], 'key_3'),
    ],
  });

  it('go by spend, then requests, with bars relative to the largest, and leave out keys with no request', () => {
    expect(topKeys(byKey)).toEqual([
      { label: 'agent', key: 'key_2', usd: 4, cost: '4', requests: 2, share: 1 },
      { label: 'editor', key: 'key_1', usd: 1, cost: '1', requests: 10, share: 0.25 },
      { label: '(no key)', key: null, usd: 0, cost: '0', requests: 7, share: 0 },
    ]);
    expect(topKeys(byKey, 1).map((k) => k.label)).toEqual(['agent']);
  });

  it('scale bars by requests when nothing has a price', () => {
    const unpriced = report({ buckets: 1, group_by: 'key', groups: [series('a', [point({ requests: 4 })]), series('b', [point({ requests: 1 })])] });
    expect(topKeys(unpriced).map((k) => k.share)).toEqual([1, 0.25]);
  });
});

describe('axis labels', () => {
  it('give dollars as many decimals as their step needs, cents at least, so no two read the same', () => {
    expect(dollarTicks([0, 0.005, 0.01, 0.015])).toEqual(['$0.000', '$0.005', '$0.010', '$0.015']);
    expect(dollarTicks([0, 0.5, 1, 1.5])).toEqual(['$0.00', '$0.50', '$1.00', '$1.50']);
    expect(dollarTicks([0, 2, 4])).toEqual(['$0', '$2', '$4']);
    expect(dollarTicks([0, 0.000002, 0.000004])).toEqual(['$0.000000', '$0.000002', '$0.000004']);
    expect(dollarTicks([0, 1000, 2000])).toEqual(['$0', '$1k', '$2k']);
    expect(dollarTicks([0])).toEqual(['$0']);
  });

  it('step counts in whole numbers', () => {
    expect(COUNT_STEPS.slice(0, 7)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(COUNT_STEPS.every(Number.isInteger)).toBe(true);
  });
});
