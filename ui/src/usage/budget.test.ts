import { describe, expect, it } from 'vitest';
import { budget } from '../test/usageFixtures';
import { budgetTitle, nearing, refusalText, refusing, warningText } from './budget';

const resets = Date.UTC(2026, 1, 2);

describe('budget notes', () => {
  const calm = budget({ percent: 40 });
  const warned = budget({ key: 'editor', period: 'monthly', enforce: true, limit: '0.0045', spent: '0.004', percent: 88, state: 'warning', resets_at: Date.UTC(2026, 2, 1) });
  const spentEnforced = budget({ enforce: true, limit: '5', spent: '5.01', percent: 100, state: 'reached', resets_at: resets });
  const spentLoose = budget({ key: 'agent', enforce: false, limit: '1', spent: '1.2', percent: 120, state: 'reached', resets_at: resets });
  const all = [calm, warned, spentEnforced, spentLoose];

  it('refuse only where a budget is enforced and spent', () => {
    expect(refusing(all)).toEqual([spentEnforced]);
  });

  it('warn from 80 %, and for a spent budget that is not enforced', () => {
    expect(nearing(all)).toEqual([warned, spentLoose]);
  });

  it('say which budget, how much of it, and what happens next', () => {
    expect(warningText(warned)).toBe(
      'The monthly budget of key “editor” is 88 % spent ($0.004 of $0.0045); requests will be refused when it is spent. It starts again at 2026-03-01 00:00 UTC.',
    );
    expect(warningText(spentLoose)).toBe('The daily budget of key “agent” is spent ($1.20 of $1.00, 120 %); it is not enforced, so requests still go through.');
    expect(refusalText(spentEnforced)).toBe(
      'Requests are refused: the daily budget over every request is spent ($5.01 of $5.00). It starts again at 2026-02-02 00:00 UTC; raise the limit or stop enforcing it in Settings → Budgets to let them through now.',
    );
    expect(budgetTitle(calm)).toBe('Daily, every request');
    expect(budgetTitle(warned)).toBe('Monthly, key “editor”');
  });
});
