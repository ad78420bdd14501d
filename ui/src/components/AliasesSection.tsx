import { useState, type FormEvent } from 'react';
import type { AliasesForm } from '../bindings/AliasesForm';
import { useAction, useApi, useResource } from '../app/context';
import { BusyButton, ErrorNote, SelectField, TextField } from './controls';
import { aliasesDraftOf, aliasField, aliasFields, checkAliasesDraft, emptyAlias, type AliasDraft, type AliasesDraft } from '../forms/aliasForm';
import { placeError } from '../forms/fieldErrors';

/**
 * The aliases and the default route, edited as one list and saved whole (`PUT /api/aliases`):
 * which alias wins depends on all of them, so they are never half saved.
 */
export function AliasesSection({ routes, combos }: { routes: string[]; combos: unknown }) {
  const api = useApi();
  // Read again when the combos change: a renamed combo takes its aliases along.
  const aliases = useResource(() => api.aliases(), [api, combos]);
  return (
    <section className="card" aria-labelledby="aliases-title">
      <h2 id="aliases-title">Aliases</h2>
      <p className="muted">
        Model names other tools send on their own (Claude Code asks for <code>claude-sonnet-4-5-…</code> and <code>claude-haiku-4-5-…</code>), routed to a combo or{' '}
        <code>provider/model</code>. <code>*</code> stands for any run of characters; matching is case-sensitive. A combo&apos;s own name always wins; among aliases the most specific
        pattern (more characters besides <code>*</code>) wins.
      </p>
      <ErrorNote error={aliases.error} />
      {aliases.data ? <AliasesEditor key={JSON.stringify(aliases.data)} saved={aliases.data} routes={routes} /> : null}
    </section>
  );
}

function AliasesEditor({ saved, routes }: { saved: AliasesForm; routes: string[] }) {
  const api = useApi();
  const [base, setBase] = useState<AliasesForm>(saved);
  const [draft, setDraft] = useState<AliasesDraft>(() => aliasesDraftOf(saved));
  const [touched, setTouched] = useState(false);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const [done, setDone] = useState(false);
  const checked = checkAliasesDraft(draft);
  const errorOf = (field: string) => (touched ? checked.errors[field] : undefined) ?? serverErrors[field] ?? null;
  const change = (next: AliasesDraft) => {
    setDraft(next);
    setServerErrors({});
    setDone(false);
  };
  const setRows = (rows: AliasDraft[]) => change({ ...draft, aliases: rows });
  const editRow = (i: number, field: keyof AliasDraft, value: string) =>
    setRows(draft.aliases.map((row, j) => (j === i ? { ...row, [field]: value } : row)));

  const save = useAction(async () => {
    if (!checked.value) return;
    try {
      const result = await api.replaceAliases(checked.value);
      setBase(result);
      setDraft(aliasesDraftOf(result));
      setTouched(false);
      setDone(true);
    } catch (error) {
      const placed = placeError(error, aliasFields(draft));
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setTouched(true);
    if (checked.value) void save.run();
  };
  const current = draft.default_route;
  const choices = current !== '' && !routes.includes(current) ? [current, ...routes] : routes;

  return (
    <form onSubmit={submit} noValidate aria-label="Aliases">
      <datalist id="alias-routes">
        {routes.map((r) => (
          <option key={r} value={r} />
        ))}
      </datalist>
      {errorOf('aliases') ? (
        <div className="error" role="alert">
          {errorOf('aliases')}
        </div>
      ) : null}
      {draft.aliases.length === 0 ? <p className="muted">No alias yet.</p> : null}
      {draft.aliases.map((row, i) => {
        const n = i + 1;
        const rowError = serverErrors[`aliases[${i}]`];
        return (
          <div className="target-row alias-row" key={i} data-testid="alias-row">
            <span className="target-index" aria-hidden="true">
              {n}
            </span>
            <TextField
              id={`alias-${i}-match`}
              label={`Alias ${n} matches`}
              placeholder="claude-*haiku*"
              value={row.match}
              onChange={(e) => editRow(i, 'match', e.target.value)}
              error={errorOf(aliasField(i, 'match'))}
              autoComplete="off"
              spellCheck={false}
            />
            <TextField
              id={`alias-${i}-to`}
              label={`Alias ${n} routes to`}
              list="alias-routes"
              placeholder="combo or provider/model"
              value={row.to}
              onChange={(e) => editRow(i, 'to', e.target.value)}
              error={errorOf(aliasField(i, 'to'))}
              autoComplete="off"
              spellCheck={false}
            />
            <div className="row target-actions">
              <button type="button" className="danger small" aria-label={`Remove alias ${n}`} onClick={() => setRows(draft.aliases.filter((_, j) => j !== i))}>
                ✕
              </button>
            </div>
            {rowError ? (
              <div className="error" role="alert">
                {rowError}
              </div>
            ) : null}
          </div>
        );
      })}
      <button type="button" className="secondary" onClick={() => setRows([...draft.aliases, { ...emptyAlias }])}>
        Add alias
      </button>
      <div className="form-grid">
        <SelectField
          id="default-route"
          label="Default route"
          value={current}
          onChange={(e) => change({ ...draft, default_route: e.target.value })}
          error={errorOf('default_route')}
          hint="Where a model name goes that no combo, provider/model or alias routes"
        >
          <option value="">None: such names get 404</option>
          {choices.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </SelectField>
      </div>
      <div className="form-actions">
        <BusyButton type="submit" busy={save.busy} busyLabel="Saving…">
          Save aliases
        </BusyButton>
        <button
          type="button"
          className="secondary"
          onClick={() => {
            change(aliasesDraftOf(base));
            setTouched(false);
          }}
        >
          Discard changes
        </button>
        {done && !save.busy ? (
          <span className="ok-text" role="status">
            Saved
          </span>
        ) : null}
      </div>
      <ErrorNote error={save.error} title="Not saved" />
    </form>
  );
}
