import { describe, expect, it } from 'vitest';
import type { BudgetSettings } from '../bindings/BudgetSettings';
import { mergePatch } from './mergePatch';
import { budgetFields, draftOf, emptyKeyRow, parseUsd, settingsOf } from './budgetForm';

const saved: BudgetSettings = {
  daily: { limit_usd: 5, enforce: true },
  keys: { editor: { monthly: { limit_usd: 0.5, enforce: false } } },
};

describe('the budgets form', () => {
  it('reads the settings as text and writes back the same settings', () => {
    const draft = draftOf(saved);
    expect(draft.overall).toEqual({ daily: { limit: '5', enforce: true }, monthly: { limit: '', enforce: false } });
    expect(draft.keys).toEqual([{ name: 'editor', daily: { limit: '', enforce: false }, monthly: { limit: '0.5', enforce: false } }]);
    expect(settingsOf(draft)).toEqual({ settings: saved, errors: {} });
  });

  it('reads amounts as people type them, and only amounts', () => {
    expect(parseUsd('5')).toBe(5);
    expect(parseUsd(' $1,000.50 ')).toBe(1000.5);
    expect(parseUsd('.25')).toBe(0.25);
    expect(parseUsd('0')).toBe(0); // in range is the server's call
    for (const text of ['five', '-1', '1e3', '1.2.3', '']) expect(parseUsd(text)).toBeNull();
  });

  it('names the field of an amount that is not one, as the server would', () => {
    const draft = draftOf(saved);
    draft.overall.monthly.limit = 'ten';
    draft.keys[0]!.daily.limit = 'lots';
    expect(settingsOf(draft).errors).toEqual({
      'monthly.limit_usd': 'Enter an amount in US dollars, e.g. 5 or 0.50',
      'keys.editor.daily.limit_usd': 'Enter an amount in US dollars, e.g. 5 or 0.50',
    });
  });

  it('patches only what changed: a cleared limit and a removed key become null', () => {
    const draft = draftOf(saved);
    draft.overall.daily.limit = '';
    draft.keys = [emptyKeyRow('agent')];
    draft.keys[0]!.daily = { limit: '2', enforce: true };
    const { settings } = settingsOf(draft);
    expect(mergePatch(saved as Record<string, unknown>, settings as Record<string, unknown>)).toEqual({
      daily: null,
      keys: { editor: null, agent: { daily: { limit_usd: 2, enforce: true } } },
    });
  });

  it('leaves out a key whose limits are all empty', () => {
    const draft = draftOf({ keys: {} });
    draft.keys.push(emptyKeyRow('idle'));
    expect(settingsOf(draft).settings).toEqual({ keys: {} });
  });

  it('lists the fields the server may blame, the key rows included', () => {
    expect(budgetFields(draftOf(saved))).toEqual([
      'daily.limit_usd',
      'monthly.limit_usd',
      'keys.editor',
      'keys.editor.daily.limit_usd',
      'keys.editor.monthly.limit_usd',
    ]);
  });
});
