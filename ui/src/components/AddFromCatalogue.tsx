import { useState, type FormEvent } from 'react';
import type { CatalogueProvider } from '../bindings/CatalogueProvider';
import type { ComboForm } from '../bindings/ComboForm';
import type { ConnectionReport } from '../bindings/ConnectionReport';
import { useAction, useApi } from '../app/context';
import {
  freeProviderId,
  lastTests,
  mergeModels,
  preselected,
  presetProvider,
  prices,
  suggestedCombo,
  tokens,
  type ModelChoice,
} from '../forms/catalogue';
import { BusyButton, ErrorNote, TextField } from './controls';
import { PresetBadge } from './CatalogueList';

/**
 * Adds one catalogue preset in three steps on one card: name, base URL and key, then Test
 * connection (which creates the provider and its credential, tests it and lists its models);
 * then the models to route to and, with one click, a first combo of them.
 */
export function AddFromCatalogue({
  preset,
  takenIds,
  takenCombos,
  onCancel,
  onDone,
}: {
  preset: CatalogueProvider;
  takenIds: readonly string[];
  takenCombos: readonly string[];
  onCancel: () => void;
  onDone: (combo: ComboForm) => void;
}) {
  const api = useApi();
  const [id, setId] = useState(() => freeProviderId(preset.id, takenIds.map((t) => ({ id: t }))));
  const [baseUrl, setBaseUrl] = useState(preset.base_url);
  const [key, setKey] = useState('');
  const [created, setCreated] = useState<string | null>(null);
  const [report, setReport] = useState<ConnectionReport | null>(null);
  const [choices, setChoices] = useState<ModelChoice[] | null>(null);
  const [chosen, setChosen] = useState<string[]>([]);
  const [combo, setCombo] = useState<ComboForm | null>(null);

  const test = useAction(async () => {
    setReport(null);
    setChoices(null);
    // A second try after a failed test starts over: the first attempt's provider goes, so the
    // new name, URL and key are all taken as typed (its key leaves the keychain with it).
    if (created !== null) {
      await api.deleteProvider(created);
      setCreated(null);
    }
    // The base URL is in the form in front of the user (filled by the preset, editable): a
    // keyless local server is used at once (its key, if any, confirms its own pair).
    await api.createProvider(presetProvider(preset, id.trim(), baseUrl), { confirm: true });
    setCreated(id.trim());
    if (key.trim() !== '') await api.createCredential(id.trim(), { id: 'main', secret: key.trim() });
    const answer = await api.testProvider(id.trim());
    lastTests.record(id.trim(), answer);
    setReport(answer);
    if (!answer.ok) return;
    // It is in the keychain now: the page keeps no copy of it (a failed test keeps it, to fix).
    setKey('');
    const discovered = await api.discoverModels(id.trim()).then(
      (d) => d.models,
      () => null,
    );
    const merged = mergeModels(preset, discovered);
    setChoices(merged);
    setChosen(preselected(merged));
  });

  const create = useAction(async () => {
    if (created === null) return;
    // The chosen models as plain ids: their facts still come from the preset.
    await api.patchProvider(created, { models: chosen });
    const form = suggestedCombo(created, chosen, takenCombos);
    const saved = await api.createCombo(form);
    setCombo(saved);
    onDone(saved);
  });

  const submit = (event: FormEvent) => {
    event.preventDefault();
    void test.run();
  };
  const toggle = (model: string) =>
    setChosen((now) => (now.includes(model) ? now.filter((m) => m !== model) : [...now, model]));

  return (
    <section className="card add-preset" aria-label={`Add ${preset.name}`}>
      <div className="row">
        <PresetBadge preset={preset} />
        <h2>{preset.name}</h2>
        {preset.keys ? (
          <a href={preset.keys} target="_blank" rel="noreferrer">
            Get a key
          </a>
        ) : null}
        <a href={preset.docs} target="_blank" rel="noreferrer">
          Docs
        </a>
      </div>
      <form className="form-grid" aria-label={`Connect ${preset.name}`} onSubmit={submit}>
        <TextField label="Provider name" value={id} onChange={(e) => setId(e.target.value)} required disabled={combo !== null} />
        <TextField
          label="Base URL"
          value={baseUrl}
          onChange={(e) => setBaseUrl(e.target.value)}
          hint="The preset's; change it only for a proxy or a self-hosted endpoint."
          disabled={combo !== null}
        />
        {preset.local ? null : (
          <TextField
            label="API key"
            type="password"
            autoComplete="off"
            value={key}
            placeholder={report?.ok ? 'Saved in the keychain' : undefined}
            onChange={(e) => setKey(e.target.value)}
            hint="Kept in the OS keychain, never in the config file."
            disabled={combo !== null}
          />
        )}
        <div className="form-actions">
          <BusyButton type="submit" busy={test.busy} busyLabel="Testing…" disabled={combo !== null || id.trim() === ''}>
            Test connection
          </BusyButton>
          <button type="button" className="secondary" onClick={onCancel} disabled={test.busy || create.busy}>
            {combo ? 'Back to the catalogue' : 'Cancel'}
          </button>
        </div>
      </form>
      <ErrorNote error={test.error} title="Cannot add this provider" />
      {report ? (
        <div className={`note ${report.ok ? 'note-ok' : 'note-error'}`} data-testid="first-run-report" role="status">
          {report.ok
            ? `Connected in ${report.latency_ms} ms${report.models !== null ? `: ${report.models} model${report.models === 1 ? '' : 's'} listed` : ''}.`
            : `The test failed${report.status !== null ? ` (${report.status})` : ''}: ${report.error ?? 'no answer'}. Check the key and the base URL, then test again.`}
        </div>
      ) : null}
      {choices ? (
        <div className="table-wrap">
          <table className="table" aria-label="Models to route to">
            <thead>
              <tr>
                <th scope="col">Use</th>
                <th scope="col">Model</th>
                <th scope="col">Window</th>
                <th scope="col">Price in / out per 1M</th>
              </tr>
            </thead>
            <tbody>
              {choices.map((c) => (
                <tr key={c.id}>
                  <td>
                    <input type="checkbox" aria-label={`Use ${c.id}`} checked={chosen.includes(c.id)} onChange={() => toggle(c.id)} disabled={combo !== null} />
                  </td>
                  <td>
                    {c.id}
                    {c.suggested ? <span className="muted"> (suggested)</span> : null}
                  </td>
                  <td>{tokens(c.facts?.context_window)}</td>
                  <td>{prices(c.facts)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {combo === null ? (
            <div className="form-actions">
              <BusyButton busy={create.busy} busyLabel="Creating…" disabled={chosen.length === 0} onClick={() => void create.run()}>
                Create combo “{suggestedCombo(created ?? id, chosen, takenCombos).name}”
              </BusyButton>
              <span className="muted">
                {chosen.length} model{chosen.length === 1 ? '' : 's'}, tried in this order when one fails.
              </span>
            </div>
          ) : null}
          <ErrorNote error={create.error} title="Cannot create the combo" />
        </div>
      ) : null}
      {combo ? (
        <div className="note note-ok" role="status" data-testid="first-run-done">
          Combo <code>{combo.name}</code> is ready: send <code>model: "{combo.name}"</code>.{' '}
          <a href="#/connect">Connect your tools</a>
        </div>
      ) : null}
    </section>
  );
}
