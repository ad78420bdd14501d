import { describe, expect, it } from 'vitest';
import { checkLockoutDraft, draftOf, type LockoutDraft } from './lockoutForm';

const defaults = draftOf({
  enabled: true,
  error_codes: [404, 429, 503],
  failure_threshold: 1,
  base_cooldown_ms: 10_000,
  max_cooldown_ms: 300_000,
  exponential_backoff: true,
  max_backoff_steps: 5,
});
const check = (change: Partial<LockoutDraft>) => checkLockoutDraft({ ...defaults, ...change });

describe('checkLockoutDraft', () => {
  it('accepts the defaults and parses them back', () => {
    expect(check({})).toEqual({
      value: {
        enabled: true,
        error_codes: [404, 429, 503],
        failure_threshold: 1,
        base_cooldown_ms: 10_000,
        max_cooldown_ms: 300_000,
        exponential_backoff: true,
        max_backoff_steps: 5,
      },
      errors: {},
    });
  });

  it('accepts an empty code list and separators', () => {
    expect(check({ error_codes: '' }).value?.error_codes).toEqual([]);
    expect(check({ error_codes: '429 503,504' }).value?.error_codes).toEqual([429, 503, 504]);
    expect(check({ base_cooldown_ms: '10_000' }).value?.base_cooldown_ms).toBe(10_000);
  });

  it.each<[Partial<LockoutDraft>, string, RegExp]>([
    [{ error_codes: '404, 418' }, 'error_codes', /418 cannot lock a model/],
    [{ error_codes: '429, 429' }, 'error_codes', /listed twice/],
    [{ error_codes: '4x4' }, 'error_codes', /not a status code/],
    [{ failure_threshold: '0' }, 'failure_threshold', /allowed 1–100/],
    [{ failure_threshold: '101' }, 'failure_threshold', /allowed 1–100/],
    [{ failure_threshold: '' }, 'failure_threshold', /whole number/],
    [{ failure_threshold: '2.5' }, 'failure_threshold', /whole number/],
    [{ base_cooldown_ms: '99' }, 'base_cooldown_ms', /allowed 100–3600000/],
    [{ max_cooldown_ms: '999' }, 'max_cooldown_ms', /allowed 1000–86400000/],
    [{ base_cooldown_ms: '60000', max_cooldown_ms: '30000' }, 'max_cooldown_ms', /at least the base/],
    [{ max_backoff_steps: '21' }, 'max_backoff_steps', /allowed 0–20/],
    [{ max_backoff_steps: '-1' }, 'max_backoff_steps', /whole number/],
  ])('refuses %o on %s', (change, field, message) => {
    const checked = check(change);
    expect(checked.value).toBeNull();
    expect(Object.keys(checked.errors)).toEqual([field]);
    expect(checked.errors[field]).toMatch(message);
  });
});
