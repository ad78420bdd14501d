import { BudgetEditor } from '../components/BudgetEditor';
import { SectionEditor } from '../components/SectionEditor';

/** Settings → Budgets: spend limits, and the usage aggregates they are checked against. */
export function BudgetsPage() {
  return (
    <div className="page">
      <header className="page-head">
        <h1>Budgets</h1>
        <a href="#/usage">Usage</a>
      </header>
      <BudgetEditor />
      <SectionEditor
        section="usage"
        title="Usage tracking"
        description="The per-hour aggregates behind the Usage page, budgets and the per-model metrics. Off, each request still carries its own usage and cost in the request log; it cannot be turned off while a budget is set."
        groups={[
          {
            fields: [
              { path: 'tracking', label: 'Track usage', kind: 'bool' },
              { path: 'retention_days', label: 'Keep aggregates (days)', kind: 'int', hint: '1–3660' },
            ],
          },
        ]}
      />
    </div>
  );
}
