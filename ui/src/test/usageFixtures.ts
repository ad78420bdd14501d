//! Usage reports and budgets as `GET /api/usage` and `/api/usage/budgets` answer them.
import type { BudgetView } from '../bindings/BudgetView';
import type { UsagePoint } from '../bindings/UsagePoint';
import type { UsageReport } from '../bindings/UsageReport';
import type { UsageSeries } from '../bindings/UsageSeries';

export const DAY = 86_400_000;
/** 2026-02-01 00:00 UTC. */
export const FEB_1 = Date.UTC(2026, 1, 1);

export function point(figures: Partial<UsagePoint> = {}): UsagePoint {
  const nanodollars = figures.cost_nanodollars ?? 0;
  return {
    requests: 0,
    fallbacks: 0,
    errors: 0,
    estimated: 0,
    cost: figures.cost ?? String(nanodollars / 1e9),
    cost_nanodollars: nanodollars,
    cost_unknown: 0,
    ttft_samples: 0,
    ttft_p50_ms: null,
    ttft_p95_ms: null,
    uncached_input: 0,
    cache_read: 0,
    cache_write: 0,
    output: 0,
    reasoning: 0,
    ...figures,
  };
}

/** The figures of several points added up (the TTFT figures are the first's with samples). */
export function added(points: UsagePoint[]): UsagePoint {
  const sum = (pick: (p: UsagePoint) => number) => points.reduce((a, p) => a + pick(p), 0);
  const timed = points.find((p) => p.ttft_samples > 0);
  return point({
    requests: sum((p) => p.requests),
    fallbacks: sum((p) => p.fallbacks),
    errors: sum((p) => p.errors),
    estimated: sum((p) => p.estimated),
    cost_nanodollars: sum((p) => p.cost_nanodollars),
    cost_unknown: sum((p) => p.cost_unknown),
    ttft_samples: sum((p) => p.ttft_samples),
    ttft_p50_ms: timed?.ttft_p50_ms ?? null,
    ttft_p95_ms: timed?.ttft_p95_ms ?? null,
    uncached_input: sum((p) => p.uncached_input),
    cache_read: sum((p) => p.cache_read),
    cache_write: sum((p) => p.cache_write),
    output: sum((p) => p.output),
    reasoning: sum((p) => p.reasoning),
  });
}

export function series(label: string, points: UsagePoint[], key: string | null = label): UsageSeries {
  return { key, label, points, total: added(points) };
}

/**
 * A report over `days` days from `from` (by the day), with `groups` as its series; the totals
 * are the groups added up (or `totals` when there are no groups).
 */
export function report({
  from = FEB_1,
  buckets = 7,
  width = DAY,
  groups = [],
  totals,
  group_by = null,
}: {
  from?: number;
  buckets?: number;
  width?: number;
  groups?: UsageSeries[];
  totals?: UsagePoint[];
  group_by?: UsageReport['group_by'];
} = {}): UsageReport {
  const starts = Array.from({ length: buckets }, (_, i) => from + i * width);
  const perBucket =
    totals ?? starts.map((_, i) => added(groups.map((g) => g.points[i] ?? point())));
  return {
    from,
    to: from + buckets * width,
    bucket: width === DAY ? 'day' : 'hour',
    group_by,
    buckets: starts,
    series: groups,
    totals: perBucket,
    total: added(perBucket),
  };
}

export function budget(view: Partial<BudgetView> = {}): BudgetView {
  return {
    key: null,
    period: 'daily',
    enforce: false,
    limit: '5',
    limit_nanodollars: 5_000_000_000,
    spent: '1',
    spent_nanodollars: 1_000_000_000,
    percent: 20,
    state: 'ok',
    resets_at: FEB_1 + DAY,
    ...view,
  };
}
