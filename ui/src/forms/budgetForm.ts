//! The Settings → Budgets form: `[settings.budgets]` as text typed by a person. Amounts are
//! checked to be amounts here; their range is the server's rule (`BudgetSettings::validate`),
//! and its refusal lands on the field it names (`budgets.keys.editor.daily.limit_usd`).
import type { BudgetLimit } from '../bindings/BudgetLimit';
import type { BudgetPeriod } from '../bindings/BudgetPeriod';
import type { BudgetSettings } from '../bindings/BudgetSettings';
import type { KeyBudgets } from '../bindings/KeyBudgets';

export const PERIODS: readonly BudgetPeriod[] = ['daily', 'monthly'];

/** One limit as typed: an empty amount means no limit. */
export type LimitDraft = { limit: string; enforce: boolean };
export type PeriodDrafts = Record<BudgetPeriod, LimitDraft>;
/** The overall limits and one row per local key, by the key's name. */
export type BudgetDraft = { overall: PeriodDrafts; keys: Array<{ name: string } & PeriodDrafts> };

const limitDraft = (limit: BudgetLimit | undefined): LimitDraft => ({
  limit: limit === undefined ? '' : String(limit.limit_usd),
  enforce: limit?.enforce ?? false,
});

const periodDrafts = (budgets: KeyBudgets): PeriodDrafts => ({
  daily: limitDraft(budgets.daily),
  monthly: limitDraft(budgets.monthly),
});

export function draftOf(settings: BudgetSettings): BudgetDraft {
  return {
    overall: periodDrafts(settings),
    keys: Object.entries(settings.keys).map(([name, budgets]) => ({ name, ...periodDrafts(budgets) })),
  };
}

/** A row for `name` with no limit yet. */
export function emptyKeyRow(name: string): BudgetDraft['keys'][number] {
  return { name, daily: { limit: '', enforce: false }, monthly: { limit: '', enforce: false } };
}

/** Where a limit's amount is in the section, as the server names it. */
export function limitField(key: string | null, period: BudgetPeriod): string {
  return key === null ? `${period}.limit_usd` : `keys.${key}.${period}.limit_usd`;
}

/** Every field of a draft the server may name, for placing its errors. */
export function budgetFields(draft: BudgetDraft): string[] {
  return [
    ...PERIODS.map((p) => limitField(null, p)),
    ...draft.keys.flatMap((row) => [`keys.${row.name}`, ...PERIODS.map((p) => limitField(row.name, p))]),
  ];
}

/** A dollar amount as typed (`5`, `0.50`, `$1,000`), or `null` when it is not one. */
export function parseUsd(text: string): number | null {
  const cleaned = text.replace(/[\s,$_]/g, '');
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(cleaned)) return null;
  const value = Number(cleaned);
  return Number.isFinite(value) ? value : null;
}

/**
 * The settings a draft stands for, or the fields that are not amounts. A limit left empty is
 * no limit, and a key without any is left out (the server drops those too).
 */
export function settingsOf(draft: BudgetDraft): { settings: BudgetSettings; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const limits = (drafts: PeriodDrafts, key: string | null): KeyBudgets => {
    const out: KeyBudgets = {};
    for (const period of PERIODS) {
      const { limit, enforce } = drafts[period];
      if (limit.trim() === '') continue;
      const usd = parseUsd(limit);
      if (usd === null) errors[limitField(key, period)] = 'Enter an amount in US dollars, e.g. 5 or 0.50';
      else out[period] = { limit_usd: usd, enforce };
    }
    return out;
  };
  const settings: BudgetSettings = { ...limits(draft.overall, null), keys: {} };
  for (const row of draft.keys) {
    const budgets = limits(row, row.name);
    if (budgets.daily !== undefined || budgets.monthly !== undefined) settings.keys[row.name] = budgets;
  }
  return { settings, errors };
}
