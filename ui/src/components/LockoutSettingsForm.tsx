import { useEffect, useState, type FormEvent } from 'react';
import type { LockoutSettings } from '../bindings/LockoutSettings';
import { useAction, useApi, useResource } from '../app/context';
import { formatSetting } from '../format/duration';
import { placeError } from '../forms/fieldErrors';
import { checkLockoutDraft, draftOf, LOCKABLE_STATUS_CODES, LOCKOUT_FIELDS, parseWhole, type LockoutDraft } from '../forms/lockoutForm';
import { isEmptyPatch, mergePatch } from '../forms/mergePatch';
import { CheckField, ErrorNote, SaveRevert, TextField } from './controls';

const msHint = (text: string) => {
  const value = parseWhole(text);
  return value === null ? undefined : `= ${formatSetting(value)}`;
};

/** Settings → Model Lockouts: checked as typed, server errors shown at the field they name. */
export function LockoutSettingsForm() {
  const api = useApi();
  const loaded = useResource(() => api.section('model_lockouts'), [api]);
  const [saved, setSaved] = useState<LockoutSettings | null>(null);
  const [draft, setDraft] = useState<LockoutDraft | null>(null);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    if (loaded.data && saved === null) {
      setSaved(loaded.data);
      setDraft(draftOf(loaded.data));
    }
  }, [loaded.data, saved]);

  const save = useAction(async (value: LockoutSettings, base: LockoutSettings) => {
    const patch = mergePatch(base as unknown as Record<string, unknown>, value as unknown as Record<string, unknown>);
    try {
      const next = await api.patchSection('model_lockouts', patch);
      setSaved(next);
      setDraft(draftOf(next));
      setNotice('Saved. The new settings apply to the next request.');
    } catch (error) {
      const placed = placeError(error, LOCKOUT_FIELDS, 'model_lockouts');
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });

  if (!draft || !saved) {
    return (
      <section aria-labelledby="lockout-settings">
        <h2 id="lockout-settings">Lockout settings</h2>
        <ErrorNote error={loaded.error} title="Cannot read the settings" />
        {loaded.error ? null : <p className="muted">Loading…</p>}
      </section>
    );
  }

  const checked = checkLockoutDraft(draft);
  const unchanged =
    checked.value !== null &&
    isEmptyPatch(mergePatch(saved as unknown as Record<string, unknown>, checked.value as unknown as Record<string, unknown>));
  const errorOf = (field: keyof LockoutDraft) => checked.errors[field] ?? serverErrors[field] ?? null;
  const edit = <K extends keyof LockoutDraft>(field: K, value: LockoutDraft[K]) => {
    setDraft({ ...draft, [field]: value });
    setNotice(null);
    if (serverErrors[field]) {
      const { [field]: _gone, ...rest } = serverErrors;
      setServerErrors(rest);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (checked.value) void save.run(checked.value, saved);
  };
  const text = (field: 'error_codes' | 'failure_threshold' | 'base_cooldown_ms' | 'max_cooldown_ms' | 'max_backoff_steps') => ({
    name: field,
    value: draft[field],
    error: errorOf(field),
    onChange: (e: { target: { value: string } }) => edit(field, e.target.value),
  });

  return (
    <section aria-labelledby="lockout-settings">
      <h2 id="lockout-settings">Lockout settings</h2>
      <p className="muted">
        A model that fails on one key is benched on that key only; the key's other models and the provider's other keys keep
        serving.
      </p>
      <form className="form-grid" onSubmit={submit} noValidate>
        <CheckField
          label="Enabled"
          name="enabled"
          checked={draft.enabled}
          onChange={(e) => edit('enabled', e.target.checked)}
          error={errorOf('enabled')}
        />
        <TextField
          label="Error codes"
          inputMode="numeric"
          hint={`Statuses that lock the model (404 and 410 always do). Allowed: ${LOCKABLE_STATUS_CODES.join(', ')}`}
          {...text('error_codes')}
        />
        <TextField label="Failure threshold" inputMode="numeric" hint="Consecutive failures before the first lock (1–100)" {...text('failure_threshold')} />
        <TextField label="Base cooldown (ms)" inputMode="numeric" hint={msHint(draft.base_cooldown_ms)} {...text('base_cooldown_ms')} />
        <TextField label="Max cooldown (ms)" inputMode="numeric" hint={msHint(draft.max_cooldown_ms)} {...text('max_cooldown_ms')} />
        <CheckField
          label="Exponential backoff"
          name="exponential_backoff"
          checked={draft.exponential_backoff}
          onChange={(e) => edit('exponential_backoff', e.target.checked)}
          error={errorOf('exponential_backoff')}
        />
        <TextField label="Max backoff steps" inputMode="numeric" hint="0–20" {...text('max_backoff_steps')} />
        <SaveRevert
          label="Save"
          busy={save.busy}
          canSave={checked.value !== null && !unchanged}
          canRevert={!save.busy}
          onRevert={() => {
            setDraft(draftOf(saved));
            setServerErrors({});
            setNotice(null);
          }}
          notice={notice}
          error={save.error}
        />
      </form>
    </section>
  );
}
