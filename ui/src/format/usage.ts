import type { TokenCounts } from '../bindings/TokenCounts';
import type { UsageView } from '../bindings/UsageView';

/** Tokens read (uncached, cache read, cache write) and written, as the log keeps them. */
export function tokensIn(usage: UsageView): number {
  return usage.uncached_input + usage.cache_read + usage.cache_write;
}

/** `1,234 → 56`: tokens in and out; `~` marks an estimate (a stream cut before its count). */
export function formatTokens(usage: UsageView | null): string {
  if (usage === null) return '—';
  const n = (v: number) => v.toLocaleString('en-US');
  return `${usage.estimated ? '~' : ''}${n(tokensIn(usage))} → ${n(usage.output)}`;
}

/** Each bucket, for a tooltip: what the total is made of. */
export function describeTokens(usage: UsageView | null): string | undefined {
  if (usage === null) return undefined;
  const parts = [
    `${usage.uncached_input} uncached input`,
    `${usage.cache_read} cache read`,
    `${usage.cache_write} cache write`,
    `${usage.output} output (${usage.reasoning} reasoning)`,
  ];
  return usage.estimated ? `${parts.join(', ')}; estimated` : parts.join(', ');
}

/**
 * A request's cost, given as a decimal string of US dollars: at least two decimals, and enough
 * significant ones that a fraction of a cent still shows (`$0.000125`). `—` when unknown.
 */
export function formatCost(cost: string | null): string {
  if (cost === null) return '—';
  const [whole = '0', fraction = ''] = cost.split('.');
  const firstDigit = fraction.search(/[1-9]/);
  const keep = Math.max(2, firstDigit < 0 ? 2 : firstDigit + 2);
  const shown = fraction.slice(0, keep).padEnd(2, '0');
  return `$${whole}.${shown}`;
}

/** Every token a request or bucket counted once: input of each kind and output (reasoning is inside output). */
export function totalTokens(counts: TokenCounts): number {
  return counts.uncached_input + counts.cache_read + counts.cache_write + counts.output;
}

/** The API's exact amounts are nanodollars (10^-9 USD): charts want dollars. */
export function nanodollarsToUsd(nanodollars: number): number {
  return nanodollars / 1e9;
}

/**
 * A cost given as a decimal string of US dollars, every digit the server sent (a usage total
 * must add up to what a bill will say): `$0.01845`, `$12.00`.
 */
export function formatUsdExact(cost: string): string {
  const [whole = '0', fraction = ''] = cost.split('.');
  return `$${whole}.${fraction.padEnd(2, '0')}`;
}

const UNIT_NAMES = ['', 'k', 'M', 'B'];

/** One decimal below ten, none above: `1.2`, `12`, `123`. */
function shortRound(value: number): number {
  return value < 10 ? Math.round(value * 10) / 10 : Math.round(value);
}

/**
 * A count short enough for an axis or a legend: `950`, `1.2k`, `12k`, `3.4M`. A count that
 * rounds up to the next unit takes it (`999,950` is `1M`, not `1000k`).
 */
export function abbreviate(n: number): string {
  if (!Number.isFinite(n)) return '';
  const sign = n < 0 ? '-' : '';
  let value = Math.abs(n);
  let unit = 0;
  while (unit < UNIT_NAMES.length - 1 && shortRound(value) >= 1000) {
    value /= 1000;
    unit += 1;
  }
  return `${sign}${shortRound(value)}${UNIT_NAMES[unit]}`;
}

/**
 * Dollars for a legend: `$0`, `$12.50`, `$1.2k`, and below a dollar two significant digits
 * and at least cents (`$0.25`, `$0.018`, `$0.0012`).
 */
export function formatDollars(usd: number): string {
  if (!Number.isFinite(usd)) return '';
  if (usd === 0) return '$0';
  const sign = usd < 0 ? '-' : '';
  const size = Math.abs(usd);
  if (size >= 1000) return `${sign}$${abbreviate(size)}`;
  if (size >= 1) return `${sign}$${size.toFixed(2)}`;
  const decimals = Math.min(9, 1 - Math.floor(Math.log10(size)));
  const [whole = '0', fraction = ''] = size.toFixed(decimals).split('.');
  return `${sign}$${whole}.${fraction.replace(/0+$/, '').padEnd(2, '0')}`;
}
