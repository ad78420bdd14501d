import type { BudgetView } from '../bindings/BudgetView';
import { budgetSpend, budgetTitle, nearing, refusalText, refusing, warningText } from '../usage/budget';
import { formatUtc } from '../usage/range';
import { Badge } from './controls';

/**
 * A banner per budget that refuses requests now, and a warning per budget at 80 % or more:
 * on the Usage page and the overview, where someone wondering why a tool stopped looks first.
 */
export function BudgetAlerts({ budgets }: { budgets: readonly BudgetView[] | undefined }) {
  if (!budgets) return null;
  return (
    <>
      {refusing(budgets).map((view) => (
        <div key={`${view.key ?? ''}/${view.period}`} className="note note-error" role="alert" data-testid="budget-refusal">
          {refusalText(view)}
        </div>
      ))}
      {nearing(budgets).map((view) => (
        <div key={`${view.key ?? ''}/${view.period}`} className="note note-warn" role="status" data-testid="budget-warning">
          {warningText(view)}
        </div>
      ))}
    </>
  );
}

const stateBadge: Record<BudgetView['state'], { tone: 'ok' | 'warn' | 'bad'; text: string }> = {
  ok: { tone: 'ok', text: 'within' },
  warning: { tone: 'warn', text: '80 % or more' },
  reached: { tone: 'bad', text: 'spent' },
};

/** Each budget's spend against its limit, as a bar. */
export function BudgetMeters({ budgets }: { budgets: readonly BudgetView[] }) {
  return (
    <ul className="plain budget-meters">
      {budgets.map((view) => {
        const title = budgetTitle(view);
        const badge = stateBadge[view.state];
        return (
          <li key={`${view.key ?? ''}/${view.period}`} data-testid="budget-meter">
            <div className="row spread">
              <strong>{title}</strong>
              <span>
                {budgetSpend(view)} <Badge tone={badge.tone}>{badge.text}</Badge>{' '}
                {view.enforce ? <Badge tone="muted">enforced</Badge> : null}
              </span>
            </div>
            <div
              className={`meter meter-${badge.tone}`}
              role="meter"
              aria-label={title}
              aria-valuemin={0}
              aria-valuemax={100}
              aria-valuenow={Math.min(view.percent, 100)}
              aria-valuetext={`${view.percent} %`}
            >
              <span style={{ width: `${Math.min(view.percent, 100)}%` }} />
            </div>
            <div className="hint">
              {view.percent} % · starts again at {formatUtc(view.resets_at)}
            </div>
          </li>
        );
      })}
    </ul>
  );
}
