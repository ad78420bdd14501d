//! The combo editor's rows as typed, and the `ComboForm` they make.
import type { ComboForm } from '../bindings/ComboForm';
import type { RouteStrategy } from '../bindings/RouteStrategy';
import type { TargetForm } from '../bindings/TargetForm';
import { parseWhole } from './lockoutForm';

export type TargetDraft = { target: string; credential: string; weight: string; context_window: string };
/** `hedge`: blank (off), a percentile such as `p95`, or milliseconds such as `800`. */
export type ComboDraft = { name: string; strategy: RouteStrategy; hedge: string; targets: TargetDraft[] };

export const emptyTarget: TargetDraft = { target: '', credential: '', weight: '', context_window: '' };
export const emptyCombo: ComboDraft = { name: '', strategy: 'priority', hedge: '', targets: [{ ...emptyTarget }] };

export function comboDraftOf(combo: ComboForm): ComboDraft {
  return {
    name: combo.name,
    strategy: combo.strategy ?? 'priority',
    hedge: combo.hedge_after ?? (combo.hedge_after_ms === undefined ? '' : String(combo.hedge_after_ms)),
    targets: combo.targets.map((t) => ({
      target: t.target,
      credential: t.credential ?? '',
      weight: t.weight === undefined ? '' : String(t.weight),
      context_window: t.context_window === undefined ? '' : String(t.context_window),
    })),
  };
}

/** Moves row `from` one place up (-1) or down (+1); out of range changes nothing. */
export function move<T>(rows: readonly T[], from: number, by: -1 | 1): T[] {
  const to = from + by;
  if (from < 0 || from >= rows.length || to < 0 || to >= rows.length) return [...rows];
  const next = [...rows];
  [next[from], next[to]] = [next[to] as T, next[from] as T];
  return next;
}

/** The server's field names for one row: `targets[2].weight`. */
export const targetField = (index: number, field: keyof TargetDraft) => `targets[${index}].${field}`;

export function comboFields(draft: ComboDraft): string[] {
  const fields = ['name', 'strategy', 'hedge_after', 'hedge_after_ms', 'targets'];
  draft.targets.forEach((_, i) => {
    for (const f of ['target', 'credential', 'weight', 'context_window'] as const) fields.push(targetField(i, f));
    fields.push(`targets[${i}]`);
  });
  return fields;
}

export function checkComboDraft(draft: ComboDraft): { value: ComboForm | null; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const name = draft.name.trim();
  if (name === '') errors.name = 'Name the combo';
  else if (!/^[A-Za-z0-9._-]{1,64}$/.test(name)) errors.name = '1 to 64 letters, digits, “.”, “_” or “-”';
  if (draft.targets.length === 0) errors.targets = 'Add at least one target';
  const targets: TargetForm[] = draft.targets.map((row, i) => {
    const target = row.target.trim();
    if (!/^[^/\s]+\/\S+$/.test(target)) errors[targetField(i, 'target')] = 'Write provider/model';
    const form: TargetForm = { target };
    if (row.credential.trim() !== '') form.credential = row.credential.trim();
    if (row.weight.trim() !== '') {
      const weight = parseWhole(row.weight);
      if (weight === null || weight < 1 || weight > 1000) errors[targetField(i, 'weight')] = 'A whole number, 1–1000';
      else form.weight = weight;
    }
    if (row.context_window.trim() !== '') {
      const window = parseWhole(row.context_window);
      if (window === null || window < 1) errors[targetField(i, 'context_window')] = 'A whole number of tokens';
      else form.context_window = window;
    }
    return form;
  });
  const value: ComboForm = { name, strategy: draft.strategy, targets };
  const hedge = draft.hedge.trim();
  if (/^p\d{1,2}$/.test(hedge)) value.hedge_after = hedge;
  else if (/^\d+$/.test(hedge)) {
    const ms = parseWhole(hedge);
    if (ms === null || ms < 1 || ms > 600000) errors.hedge_after_ms = 'Milliseconds, 1–600000';
    else value.hedge_after_ms = ms;
  } else if (hedge !== '') errors.hedge_after = 'A percentile such as p95, or milliseconds such as 800';
  if (Object.keys(errors).length > 0) return { value: null, errors };
  return { value, errors };
}
