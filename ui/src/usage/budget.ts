//! Budgets as the Usage page and the overview tell of them: which are near their limit (80 %),
//! which refuse requests now, in words a person can act on.
import type { BudgetView } from '../bindings/BudgetView';
import { formatCost } from '../format/usage';
import { formatUtc } from './range';

/** `the daily budget over every request`, `the monthly budget of key “editor”`. */
export function budgetName(view: BudgetView): string {
  return view.key === null ? `the ${view.period} budget over every request` : `the ${view.period} budget of key “${view.key}”`;
}

/** A budget's title for a list: `Daily, every request`, `Monthly, key “editor”`. */
export function budgetTitle(view: BudgetView): string {
  const period = view.period === 'daily' ? 'Daily' : 'Monthly';
  return view.key === null ? `${period}, every request` : `${period}, key “${view.key}”`;
}

/** `$4.00 of $5.00`. */
export function budgetSpend(view: BudgetView): string {
  return `${formatCost(view.spent)} of ${formatCost(view.limit)}`;
}

/** Budgets that refuse requests now: enforced and spent. */
export function refusing(views: readonly BudgetView[]): BudgetView[] {
  return views.filter((v) => v.enforce && v.state === 'reached');
}

/** Budgets at 80 % or more that do not refuse anything (yet, or ever: not enforced). */
export function nearing(views: readonly BudgetView[]): BudgetView[] {
  return views.filter((v) => v.state === 'warning' || (v.state === 'reached' && !v.enforce));
}

/** The sentence for a budget that refuses requests. */
export function refusalText(view: BudgetView): string {
  const name = budgetName(view);
  return `Requests are refused: ${name} is spent (${budgetSpend(view)}). It starts again at ${formatUtc(view.resets_at)}; raise the limit or stop enforcing it in Settings → Budgets to let them through now.`;
}

/** The sentence for a budget at 80 % or more. */
export function warningText(view: BudgetView): string {
  const name = budgetName(view);
  const capital = name.charAt(0).toUpperCase() + name.slice(1);
  if (view.state === 'reached') {
    return `${capital} is spent (${budgetSpend(view)}, ${view.percent} %); it is not enforced, so requests still go through.`;
  }
  const then = view.enforce ? 'requests will be refused when it is spent' : 'it is not enforced';
  return `${capital} is ${view.percent} % spent (${budgetSpend(view)}); ${then}. It starts again at ${formatUtc(view.resets_at)}.`;
}
