//! The Settings → Model Lockouts form: text as typed, checked here with the server's own rules
//! (crates/switchyard-core/src/settings.rs, `LockoutSettings::validate`), so most mistakes are
//! caught before a round trip. The server stays the judge: its errors land on the same fields.
import type { LockoutSettings } from '../bindings/LockoutSettings';

/** The status codes that may lock a model (`LOCKABLE_STATUS_CODES`). */
export const LOCKABLE_STATUS_CODES = [404, 408, 410, 429, 500, 502, 503, 504, 529] as const;

export type LockoutDraft = {
  enabled: boolean;
  error_codes: string;
  failure_threshold: string;
  base_cooldown_ms: string;
  max_cooldown_ms: string;
  exponential_backoff: boolean;
  max_backoff_steps: string;
};

export const LOCKOUT_FIELDS = [
  'enabled',
  'error_codes',
  'failure_threshold',
  'base_cooldown_ms',
  'max_cooldown_ms',
  'exponential_backoff',
  'max_backoff_steps',
] as const;

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;

export function draftOf(settings: LockoutSettings): LockoutDraft {
  return {
    enabled: settings.enabled,
    error_codes: settings.error_codes.join(', '),
    failure_threshold: String(settings.failure_threshold),
    base_cooldown_ms: String(settings.base_cooldown_ms),
    max_cooldown_ms: String(settings.max_cooldown_ms),
    exponential_backoff: settings.exponential_backoff,
    max_backoff_steps: String(settings.max_backoff_steps),
  };
}

/** A whole number typed by a person: digits only (spaces and `_` allowed as separators). */
export function parseWhole(text: string): number | null {
  const cleaned = text.replace(/[\s_]/g, '');
  if (!/^\d+$/.test(cleaned)) return null;
  const value = Number(cleaned);
  return Number.isSafeInteger(value) ? value : null;
}

function ranged(text: string, min: number, max: number, errors: Record<string, string>, field: string): number {
  const value = parseWhole(text);
  if (value === null) {
    errors[field] = 'Enter a whole number';
    return NaN;
  }
  if (value < min || value > max) {
    errors[field] = `${value} is out of range; allowed ${min}–${max}`;
  }
  return value;
}

export type Checked<T> = { value: T | null; errors: Record<string, string> };

export function checkLockoutDraft(draft: LockoutDraft): Checked<LockoutSettings> {
  const errors: Record<string, string> = {};
  const codes: number[] = [];
  const parts = draft.error_codes.split(/[\s,]+/).filter((p) => p !== '');
  for (const part of parts) {
    const code = parseWhole(part);
    if (code === null) {
      errors.error_codes = `“${part}” is not a status code`;
      break;
    }
    if (!(LOCKABLE_STATUS_CODES as readonly number[]).includes(code)) {
      errors.error_codes = `${code} cannot lock a model; allowed ${LOCKABLE_STATUS_CODES.join(', ')}`;
      break;
    }
    if (codes.includes(code)) {
      errors.error_codes = `${code} is listed twice`;
      break;
    }
    codes.push(code);
  }
  const failure_threshold = ranged(draft.failure_threshold, 1, 100, errors, 'failure_threshold');
  const base_cooldown_ms = ranged(draft.base_cooldown_ms, 100, HOUR, errors, 'base_cooldown_ms');
  const max_cooldown_ms = ranged(draft.max_cooldown_ms, SECOND, DAY, errors, 'max_cooldown_ms');
  if (!errors.base_cooldown_ms && !errors.max_cooldown_ms && max_cooldown_ms < base_cooldown_ms) {
    errors.max_cooldown_ms = `Must be at least the base cooldown (${base_cooldown_ms} ms)`;
  }
  const max_backoff_steps = ranged(draft.max_backoff_steps, 0, 20, errors, 'max_backoff_steps');
  if (Object.keys(errors).length > 0) return { value: null, errors };
  return {
    value: {
      enabled: draft.enabled,
      error_codes: codes,
      failure_threshold,
      base_cooldown_ms,
      max_cooldown_ms,
      exponential_backoff: draft.exponential_backoff,
      max_backoff_steps,
    },
    errors,
  };
}
