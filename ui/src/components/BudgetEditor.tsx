import { useEffect, useId, useState, type FormEvent } from 'react';
import type { BudgetPeriod } from '../bindings/BudgetPeriod';
import type { BudgetSettings } from '../bindings/BudgetSettings';
import { useAction, useApi, useResource } from '../app/context';
import { budgetFields, draftOf, emptyKeyRow, limitField, PERIODS, settingsOf, type BudgetDraft, type PeriodDrafts } from '../forms/budgetForm';
import { placeError } from '../forms/fieldErrors';
import { isEmptyPatch, mergePatch } from '../forms/mergePatch';
import { CheckField, ErrorNote, SaveRevert, TextField } from './controls';

const periodLabel: Record<BudgetPeriod, string> = { daily: 'Daily', monthly: 'Monthly' };

/**
 * `[settings.budgets]`: daily and monthly limits over every request and per local key, each
 * enforced or not. Saves a merge patch of what changed; a refusal lands on the field it names.
 */
export function BudgetEditor() {
  const api = useApi();
  const loaded = useResource(() => api.section('budgets'), [api]);
  const keys = useResource(() => api.keys(), [api]);
  const [saved, setSaved] = useState<BudgetSettings | null>(null);
  const [draft, setDraft] = useState<BudgetDraft | null>(null);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);
  const [newKey, setNewKey] = useState('');
  const [newKeyError, setNewKeyError] = useState<string | null>(null);
  const listId = useId();

  useEffect(() => {
    if (loaded.data !== undefined && saved === null) {
      setSaved(loaded.data);
      setDraft(draftOf(loaded.data));
    }
  }, [loaded.data, saved]);

  const save = useAction(async (next: BudgetSettings, fields: string[]) => {
    const patch = mergePatch(saved as Record<string, unknown>, next as Record<string, unknown>);
    if (isEmptyPatch(patch)) return;
    try {
      const result = await api.patchSection('budgets', patch);
      setSaved(result);
      setDraft(draftOf(result));
      setNotice('Saved. Budgets apply from the next request.');
    } catch (error) {
      const placed = placeError(error, fields, 'budgets');
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });

  if (saved === null || draft === null) {
    return (
      <section className="card" aria-labelledby="budgets-heading">
        <h2 id="budgets-heading">Spend budgets</h2>
        <ErrorNote error={loaded.error} title="Cannot read the budgets" />
        {loaded.error ? null : <p className="muted">Loading…</p>}
      </section>
    );
  }

  const { settings, errors: clientErrors } = settingsOf(draft);
  const valid = Object.keys(clientErrors).length === 0;
  const unchanged = valid && isEmptyPatch(mergePatch(saved as Record<string, unknown>, settings as Record<string, unknown>));
  const errorOf = (field: string) => clientErrors[field] ?? serverErrors[field] ?? null;
  const edit = (next: BudgetDraft, field?: string) => {
    setDraft(next);
    setNotice(null);
    if (field && serverErrors[field]) {
      const { [field]: _gone, ...rest } = serverErrors;
      setServerErrors(rest);
    }
  };
  const editOverall = (drafts: PeriodDrafts, field: string) => edit({ ...draft, overall: drafts }, field);
  const editKey = (index: number, drafts: PeriodDrafts, field: string) =>
    edit({ ...draft, keys: draft.keys.map((row, i) => (i === index ? { ...row, ...drafts } : row)) }, field);
  const removeKey = (index: number) => edit({ ...draft, keys: draft.keys.filter((_, i) => i !== index) });
  const addKey = () => {
    const name = newKey.trim();
    if (name === '') {
      setNewKeyError('Name the key, as in Settings → General (or preset for SWITCHYARD_API_KEY)');
      return;
    }
    if (draft.keys.some((row) => row.name === name)) {
      setNewKeyError(`Key “${name}” has budgets already: edit them above`);
      return;
    }
    setNewKeyError(null);
    setNewKey('');
    edit({ ...draft, keys: [...draft.keys, emptyKeyRow(name)] });
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (valid) void save.run(settings, budgetFields(draft));
  };
  const taken = new Set(draft.keys.map((row) => row.name));
  const names = (keys.data ?? []).filter((k) => k.revoked_at === null && !taken.has(k.name)).map((k) => k.name);

  return (
    <section className="card" aria-labelledby="budgets-heading">
      <h2 id="budgets-heading">Spend budgets</h2>
      <p className="muted">
        Spend is what finished requests cost at the prices configured, per UTC day or month. At 80 % the Usage page, the overview and the desktop app
        warn; an enforced budget refuses requests once spent (status 429, which the OpenAI and Anthropic SDKs do not retry) until its period starts
        again. An empty limit is no limit.
      </p>
      <form onSubmit={submit} noValidate aria-labelledby="budgets-heading">
        <fieldset className="group budget-group">
          <legend>Every request</legend>
          <LimitInputs idPrefix="budgets-all" keyName={null} drafts={draft.overall} errorOf={errorOf} onChange={editOverall} />
        </fieldset>
        {draft.keys.map((row, index) => {
          const nameError = serverErrors[`keys.${row.name}`];
          return (
            <fieldset key={row.name} className="group budget-group">
              <legend>Key “{row.name}”</legend>
              {nameError ? (
                <div className="error" role="alert">
                  {nameError}
                </div>
              ) : null}
              <LimitInputs idPrefix={`budgets-key-${index}`} keyName={row.name} drafts={row} errorOf={errorOf} onChange={(drafts, field) => editKey(index, drafts, field)} />
              <button type="button" className="danger small" onClick={() => removeKey(index)} aria-label={`Remove the budgets of key ${row.name}`}>
                Remove
              </button>
            </fieldset>
          );
        })}
        <div className="row align-end">
          <TextField
            label="Budgets for a local key"
            placeholder="key name"
            list={listId}
            value={newKey}
            onChange={(e) => {
              setNewKey(e.target.value);
              setNewKeyError(null);
            }}
            onKeyDown={(e) => {
              if (e.key === 'Enter') {
                e.preventDefault();
                addKey();
              }
            }}
            error={newKeyError}
            autoComplete="off"
          />
          <datalist id={listId}>
            {names.map((name) => (
              <option key={name} value={name} />
            ))}
          </datalist>
          <button type="button" className="secondary" onClick={addKey}>
            Add key budgets
          </button>
        </div>
        <SaveRevert
          label="Save budgets"
          busy={save.busy}
          canSave={valid && !unchanged}
          canRevert={!save.busy && !unchanged}
          onRevert={() => {
            setDraft(draftOf(saved));
            setServerErrors({});
          }}
          notice={notice}
          error={save.error}
        />
      </form>
    </section>
  );
}

function LimitInputs({
  idPrefix,
  keyName,
  drafts,
  errorOf,
  onChange,
}: {
  idPrefix: string;
  keyName: string | null;
  drafts: PeriodDrafts;
  errorOf: (field: string) => string | null;
  onChange: (drafts: PeriodDrafts, field: string) => void;
}) {
  return (
    <div className="form-grid">
      {PERIODS.map((period) => {
        const field = limitField(keyName, period);
        const draft = drafts[period];
        return (
          <div key={period} className="budget-limit">
            <TextField
              id={`${idPrefix}-${period}`}
              label={`${periodLabel[period]} limit (USD)`}
              inputMode="decimal"
              placeholder="no limit"
              value={draft.limit}
              onChange={(e) => onChange({ ...drafts, [period]: { ...draft, limit: e.target.value } }, field)}
              error={errorOf(field)}
            />
            <CheckField
              id={`${idPrefix}-${period}-enforce`}
              label={`Enforce the ${period} limit`}
              hint="Refuse requests once it is spent"
              checked={draft.enforce}
              disabled={draft.limit.trim() === ''}
              onChange={(e) => onChange({ ...drafts, [period]: { ...draft, enforce: e.target.checked } }, field)}
            />
          </div>
        );
      })}
    </div>
  );
}
