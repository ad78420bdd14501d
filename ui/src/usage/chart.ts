//! Chart data from `GET /api/usage` reports: pure functions, so what the charts show is tested
//! without a canvas. Every array of values is aligned with the report's `buckets`; a bucket a
//! series has no point for counts as zero.
import type { UsagePoint } from '../bindings/UsagePoint';
import type { UsageReport } from '../bindings/UsageReport';
import { formatDollars, nanodollarsToUsd, totalTokens } from '../format/usage';

/** One line or stack of bars: a value per bucket. */
export type Series = { label: string; values: number[] };
/** The x values (bucket starts, ms) and the series over them. */
export type ChartData = { x: number[]; series: Series[] };

export type Metric = 'spend' | 'tokens';

/** Spend in dollars (from the exact nanodollars), or every token counted once. */
export function metricOf(point: UsagePoint, metric: Metric): number {
  return metric === 'spend' ? nanodollarsToUsd(point.cost_nanodollars) : totalTokens(point);
}

/** `pick` of each bucket's point; a bucket without one is a zero. */
export function alignPoints(buckets: readonly number[], points: readonly UsagePoint[] | undefined, pick: (p: UsagePoint) => number): number[] {
  return buckets.map((_, i) => {
    const point = points?.[i];
    return point === undefined ? 0 : pick(point);
  });
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

/**
 * Spend or tokens per bucket, one series per group of the report (or one, `All`, when it has
 * no groups), the largest first. Groups that add nothing to this metric are left out (a model
 * without a price spends nothing); past `maxSeries`, the smallest are folded into one `Other`
 * series so the colours stay tellable apart.
 */
export function stackedChart(report: UsageReport, metric: Metric, maxSeries = 6): ChartData {
  const pick = (p: UsagePoint) => metricOf(p, metric);
  const groups =
    report.series.length === 0
      ? [{ label: 'All', values: alignPoints(report.buckets, report.totals, pick) }]
      : report.series.map((s) => ({ label: s.label, values: alignPoints(report.buckets, s.points, pick) }));
  const ranked = groups
    .map((s, order) => ({ ...s, order, total: sum(s.values) }))
    .filter((s) => s.total > 0)
    .sort((a, b) => b.total - a.total || a.order - b.order);
  let series: Series[] = ranked.map(({ label, values }) => ({ label, values }));
  if (series.length > maxSeries) {
    const kept = series.slice(0, maxSeries - 1);
    const rest = series.slice(maxSeries - 1);
    const other = report.buckets.map((_, i) => sum(rest.map((s) => s.values[i] ?? 0)));
    series = [...kept, { label: `Other (${rest.length})`, values: other }];
  }
  return { x: [...report.buckets], series };
}

/**
 * Where each series of a stack is drawn: the first series on top, so its line is itself plus
 * everything under it, and the last at the bottom. Drawn in order, each fill covers the part
 * of the one before that belongs to the series below.
 */
export function stackFromTop(values: readonly (readonly number[])[]): number[][] {
  const out: number[][] = values.map((v) => [...v]);
  for (let i = out.length - 2; i >= 0; i--) {
    const below = out[i + 1]!;
    out[i] = out[i]!.map((v, j) => v + (below[j] ?? 0));
  }
  return out;
}

/**
 * What a chart draws per series: the stack's tops (or the values as they are), with a bucket
 * where the series itself has nothing left empty (`null`), so no zero-height bar is drawn.
 */
export function drawnValues(values: readonly (readonly number[])[], stacked: boolean): (number | null)[][] {
  const tops = stacked ? stackFromTop(values) : values.map((v) => [...v]);
  return tops.map((top, i) => top.map((v, j) => (values[i]?.[j] === 0 ? null : v)));
}

/** Counts go up in whole steps: a chart of requests never has a tick at 2.5. */
export const COUNT_STEPS: number[] = Array.from({ length: 13 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

/**
 * Dollar ticks with as many decimals as their step needs and at least cents (`$0.005`,
 * `$0.010`; `$0.50`; `$1`, `$2`), so two ticks never read the same.
 */
export function dollarTicks(ticks: readonly number[]): string[] {
  const steps = ticks.slice(1).map((t, i) => Math.abs(t - ticks[i]!)).filter((d) => d > 0);
  const step = steps.length > 0 ? Math.min(...steps) : Math.abs(ticks[0] ?? 1) || 1;
  if (Math.max(...ticks.map(Math.abs)) >= 1000) return ticks.map((t) => formatDollars(t));
  let decimals = Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
  if (decimals > 0) decimals = Math.min(9, Math.max(2, decimals));
  return ticks.map((t) => `${t < 0 ? '-' : ''}$${Math.abs(t).toFixed(decimals)}`);
}

/** Requests and, among them, fallbacks per bucket. */
export function activityChart(report: UsageReport): ChartData {
  return {
    x: [...report.buckets],
    series: [
      { label: 'Requests', values: alignPoints(report.buckets, report.totals, (p) => p.requests) },
      { label: 'Fallbacks', values: alignPoints(report.buckets, report.totals, (p) => p.fallbacks) },
    ],
  };
}

/** Whether a chart has anything to draw. */
export function isEmptyChart(data: ChartData): boolean {
  return data.series.every((s) => s.values.every((v) => v === 0));
}

/** Time to first token of one group over the whole range. */
export type Latency = { label: string; p50: number; p95: number; samples: number };

/**
 * Time to first token per group of a `group_by=provider` report, over the whole range, by
 * name; groups without a streamed request have no figure and are left out.
 */
export function latencies(report: UsageReport): Latency[] {
  const out: Latency[] = [];
  for (const s of report.series) {
    const { ttft_p50_ms: p50, ttft_p95_ms: p95, ttft_samples: samples } = s.total;
    if (samples > 0 && p50 !== null && p95 !== null) out.push({ label: s.label, p50, p95, samples });
  }
  return out.sort((a, b) => a.label.localeCompare(b.label));
}

/** What one local key (one tool) spent over the range. */
export type KeySpend = {
  label: string;
  /** The key's id; `null` for requests without one (the UI's "try it"). */
  key: string | null;
  usd: number;
  /** Exact, as the server sent it. */
  cost: string;
  requests: number;
  /** Its bar's length: its spend over the largest (its requests over the most, when nothing has a price). */
  share: number;
};

/** The `n` keys of a `group_by=key` report that spent the most, then made the most requests. */
export function topKeys(report: UsageReport, n = 5): KeySpend[] {
  const ranked = report.series
    .map((s, order) => ({ s, order }))
    .filter(({ s }) => s.total.requests > 0)
    .sort((a, b) => b.s.total.cost_nanodollars - a.s.total.cost_nanodollars || b.s.total.requests - a.s.total.requests || a.order - b.order)
    .slice(0, n)
    .map(({ s }) => s);
  const maxSpend = Math.max(0, ...ranked.map((s) => s.total.cost_nanodollars));
  const maxRequests = Math.max(0, ...ranked.map((s) => s.total.requests));
  return ranked.map((s) => ({
    label: s.label,
    key: s.key,
    usd: nanodollarsToUsd(s.total.cost_nanodollars),
    cost: s.total.cost,
    requests: s.total.requests,
    share: maxSpend > 0 ? s.total.cost_nanodollars / maxSpend : maxRequests > 0 ? s.total.requests / maxRequests : 0,
  }));
}
