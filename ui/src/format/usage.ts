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
