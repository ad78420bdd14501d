import { useState, type FormEvent } from 'react';
import type { Binding } from '../bindings/Binding';
import type { BreakerProfile } from '../bindings/BreakerProfile';
import type { ConnectionReport } from '../bindings/ConnectionReport';
import type { DiscoveredModels } from '../bindings/DiscoveredModels';
import type { OpenAiApi } from '../bindings/OpenAiApi';
import type { ProviderKind } from '../bindings/ProviderKind';
import type { ProviderView } from '../bindings/ProviderView';
import type { SelectionStrategy } from '../bindings/SelectionStrategy';
import type { HeadroomView } from '../bindings/HeadroomView';
import { useAction, useApi, useLiveVersion, useNow, useResource } from '../app/context';
import { Badge, BusyButton, CheckField, ErrorNote, SaveActions, SelectField, TextField } from '../components/controls';
import { CredentialEditor } from '../components/CredentialEditor';
import { HeadroomBars, headroomLabel } from '../components/Headroom';
import { lastTests } from '../forms/catalogue';
import { placeError } from '../forms/fieldErrors';
import { isEmptyPatch } from '../forms/mergePatch';
import { loginName } from '../format/login';
import {
  adoptModels,
  checkProviderDraft,
  emptyProvider,
  PROVIDER_FIELDS,
  providerDraftOf,
  providerPatch,
  type ProviderDraft,
} from '../forms/providerForm';

/**
 * `env:VAR to https://host:443`, for each pair a credential would send, and `requests to
 * https://host:443` for each destination its requests would go to.
 */
function describePairs(pairs: Binding[]): string {
  return pairs.map((p) => `${p.reference === null ? 'requests' : (loginName(p.reference) ?? p.reference)} to ${p.destination}`).join(', ');
}

function capitalisedFirst(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}

export function ProvidersPage() {
  const api = useApi();
  const providers = useResource(() => api.providers(), [api]);
  // Each credential's quota windows, as the health page has them, kept up to date.
  const live = useLiveVersion();
  const health = useResource(() => api.health(), [api, live]);
  const now = useNow(1000);
  const [adding, setAdding] = useState(false);
  return (
    <div className="page">
      <header className="page-head">
        <h1>Providers</h1>
        {adding ? null : (
          <div className="row">
            <a className="button-link secondary" href="#/catalogue">
              Add from catalogue
            </a>
            <button type="button" onClick={() => setAdding(true)}>
              Add provider
            </button>
          </div>
        )}
      </header>
      <ErrorNote error={providers.error} title="Cannot read providers" />
      {adding ? (
        <ProviderEditor
          provider={null}
          onSaved={() => {
            setAdding(false);
            void providers.reload();
          }}
          onCancel={() => setAdding(false)}
        />
      ) : null}
      {providers.data && providers.data.length === 0 && !adding ? (
        <p className="muted">No provider yet. Add one: an OpenAI, Anthropic or Gemini compatible API, or a local server.</p>
      ) : null}
      {(providers.data ?? []).map((p) => (
        <ProviderCard
          key={p.id}
          provider={p}
          headroom={(health.data?.headroom ?? []).filter((v) => v.provider === p.id)}
          now={now}
          onChanged={() => void providers.reload()}
        />
      ))}
    </div>
  );
}

function ProviderCard({
  provider,
  headroom,
  now,
  onChanged,
}: {
  provider: ProviderView;
  headroom: HeadroomView[];
  now: number;
  onChanged: () => void;
}) {
  const api = useApi();
  const [editing, setEditing] = useState(false);
  const [editingCredential, setEditingCredential] = useState<string | null>(null);
  const [addingCredential, setAddingCredential] = useState(false);
  const [report, setReport] = useState<ConnectionReport | null>(null);
  const [models, setModels] = useState<DiscoveredModels | null>(null);
  const test = useAction(async () => {
    setReport(null);
    const answer = await api.testProvider(provider.id);
    lastTests.record(provider.id, answer);
    setReport(answer);
  });
  const discover = useAction(async () => {
    setModels(null);
    setModels(await api.discoverModels(provider.id));
  });
  const adopt = useAction(async (names: string[]) => {
    await api.patchProvider(provider.id, { models: adoptModels(provider.models, names) });
    onChanged();
  });
  const remove = useAction(async () => {
    if (!window.confirm(`Remove provider ${provider.id} and its credentials?`)) return;
    await api.deleteProvider(provider.id);
    onChanged();
  });
  const removeCredential = useAction(async (id: string) => {
    if (!window.confirm(`Remove credential ${id} of ${provider.id}?`)) return;
    await api.deleteCredential(provider.id, id);
    onChanged();
  });
  const toggleCredential = useAction(async (id: string, enabled: boolean) => {
    await api.patchCredential(provider.id, id, { enabled });
    onChanged();
  });
  // A credential an import or edit pointed at a host it was never confirmed for stays unused
  // until the user, shown exactly which secret goes where, agrees (issue 19).
  const confirmCredential = useAction(async (id: string, pairs: string) => {
    if (!window.confirm(`Send ${pairs}?`)) return;
    await api.confirmCredential(provider.id, id);
    onChanged();
  });
  // A secret that cannot be read (a variable not set, a keychain entry missing or locked, a file
  // not there yet) leaves only its credential out; it is read again every few seconds, and at
  // once here.
  const retrySecret = useAction(async (id: string) => {
    await api.retrySecret(provider.id, id);
    onChanged();
  });
  // Where the provider's requests go needs confirming too, with or without a secret: a keyless
  // provider an import or edit pointed at a new host would get every prompt (issue 26). The
  // provider's Confirm confirms everything it lists, secrets included, so it asks about all.
  const newHosts = provider.unconfirmed.filter((b) => b.reference === null);
  // A subscription's login to a host other than its own: its credential is implicit (no row
  // of its own to confirm it on), so the provider's Confirm names it (issue 56).
  const logins = provider.unconfirmed.filter((b) => b.reference !== null && loginName(b.reference) !== null);
  const confirmProvider = useAction(async () => {
    if (!window.confirm(`Send ${describePairs(provider.unconfirmed)}?`)) return;
    await api.confirmProvider(provider.id);
    onChanged();
  });

  return (
    <article className="card provider" aria-label={`Provider ${provider.id}`} data-testid={`provider-${provider.id}`}>
      <div className="row spread">
        <div>
          <h2>
            {provider.id} <Badge tone="muted">{provider.kind}</Badge>
          </h2>
          <div className="muted">
            <code>{provider.effective_base_url}</code>
            {provider.models.length > 0 ? ` · ${provider.models.length} models` : ''}
          </div>
        </div>
        <div className="row">
          <BusyButton className="secondary" busy={test.busy} busyLabel="Testing…" onClick={() => void test.run()}>
            Test connection
          </BusyButton>
          <BusyButton className="secondary" busy={discover.busy} busyLabel="Discovering…" onClick={() => void discover.run()}>
            Discover models
          </BusyButton>
          <button type="button" className="secondary" onClick={() => setEditing(!editing)} aria-expanded={editing}>
            {editing ? 'Close editor' : 'Edit'}
          </button>
          <BusyButton className="danger" busy={remove.busy} busyLabel="Removing…" onClick={() => void remove.run()} aria-label={`Remove provider ${provider.id}`}>
            Remove
          </BusyButton>
        </div>
      </div>
      <ErrorNote error={test.error ?? discover.error ?? remove.error ?? adopt.error ?? confirmProvider.error} />
      {newHosts.length > 0 || logins.length > 0 ? (
        <div className="note note-warn" data-testid={`unconfirmed-provider-${provider.id}`}>
          <Badge tone="warn">unconfirmed</Badge> Not used until you confirm:{' '}
          {newHosts.length > 0
            ? `its requests (your prompts, and whatever your tools put in them) would go to ${newHosts.map((b) => b.destination).join(', ')}, which you never confirmed. `
            : ''}
          {logins.map((b) => `${capitalisedFirst(loginName(b.reference!)!)} would be sent to ${b.destination}, not the subscription's own host. `).join('')}
          <button
            type="button"
            className="small"
            disabled={confirmProvider.busy}
            onClick={() => void confirmProvider.run()}
            aria-label={`Confirm provider ${provider.id}`}
            title={`Send ${describePairs(provider.unconfirmed)}?`}
          >
            Confirm
          </button>
        </div>
      ) : null}
      {report ? (
        <div className={`note ${report.ok ? 'note-ok' : 'note-error'}`} role="status" data-testid="connection-report">
          {report.ok
            ? `Connected with ${report.credential} in ${report.latency_ms} ms${report.models !== null ? `: ${report.models} models listed` : ''}.`
            : `Failed with ${report.credential}${report.status !== null ? ` (HTTP ${report.status})` : ''}: ${report.error ?? 'no answer'}`}
        </div>
      ) : null}
      {models ? (
        <div className="note" role="status" data-testid="discovered-models">
          <strong>{models.models.length} models</strong> listed for {models.credential}:{' '}
          {models.models.length > 0 ? models.models.join(', ') : 'none'}
          {models.models.length > 0 ? (
            <div>
              <BusyButton className="secondary small" busy={adopt.busy} busyLabel="Saving…" onClick={() => void adopt.run(models.models)}>
                Use these as the provider's models
              </BusyButton>
            </div>
          ) : null}
        </div>
      ) : null}
      {editing ? (
        <ProviderEditor
          provider={provider}
          onSaved={() => {
            setEditing(false);
            onChanged();
          }}
          onCancel={() => setEditing(false)}
        />
      ) : null}

      <h3>Credentials</h3>
      <ErrorNote error={removeCredential.error ?? toggleCredential.error ?? confirmCredential.error ?? retrySecret.error} />
      {provider.credentials.length === 0 ? <p className="muted">No credential: requests go without a key.</p> : null}
      <ul className="plain credentials">
        {provider.credentials.map((c) => (
          <li key={c.id}>
            <div className="row spread">
              <span>
                <strong>{c.id}</strong> <Badge tone="muted">{c.kind === 'oauth' ? 'OAuth' : 'API key'}</Badge>{' '}
                {c.enabled ? <Badge tone="ok">enabled</Badge> : <Badge tone="warn">disabled</Badge>}{' '}
                {c.unconfirmed.length > 0 ? (
                  <>
                    <Badge tone="warn">unconfirmed</Badge>{' '}
                  </>
                ) : null}
                {c.secret.unavailable ? (
                  <>
                    <Badge tone="bad">waiting for its secret</Badge>{' '}
                  </>
                ) : null}
                <span className="muted">
                  priority {c.priority} · {c.secret.set ? `set ${c.secret.hint ?? ''}`.trim() : 'no secret'}
                  {c.secret.reference ? ` (${c.secret.reference})` : ''}
                </span>
              </span>
              <span className="row">
                {c.secret.unavailable ? (
                  <button
                    type="button"
                    className="small"
                    disabled={retrySecret.busy}
                    onClick={() => void retrySecret.run(c.id)}
                    aria-label={`Retry the secret of credential ${c.id} now`}
                  >
                    Retry now
                  </button>
                ) : null}
                {c.unconfirmed.length > 0 ? (
                  <button
                    type="button"
                    className="small"
                    disabled={confirmCredential.busy}
                    onClick={() => void confirmCredential.run(c.id, describePairs(c.unconfirmed))}
                    aria-label={`Confirm credential ${c.id}`}
                    title={`Send ${describePairs(c.unconfirmed)}?`}
                  >
                    Confirm
                  </button>
                ) : null}
                <button
                  type="button"
                  className="secondary small"
                  disabled={toggleCredential.busy}
                  onClick={() => void toggleCredential.run(c.id, !c.enabled)}
                  aria-label={`${c.enabled ? 'Disable' : 'Enable'} credential ${c.id}`}
                >
                  {c.enabled ? 'Disable' : 'Enable'}
                </button>
                <button
                  type="button"
                  className="secondary small"
                  onClick={() => setEditingCredential(editingCredential === c.id ? null : c.id)}
                  aria-expanded={editingCredential === c.id}
                  aria-label={`Edit credential ${c.id}`}
                >
                  Edit
                </button>
                <button
                  type="button"
                  className="danger small"
                  disabled={removeCredential.busy}
                  onClick={() => void removeCredential.run(c.id)}
                  aria-label={`Remove credential ${c.id}`}
                >
                  Remove
                </button>
              </span>
            </div>
            {headroom
              .filter((v) => v.credential === c.id || v.credential.startsWith(`${c.id}~`))
              .map((v) => (
                <HeadroomBars key={v.credential} view={v} now={now} label={headroomLabel(v)} />
              ))}
            {c.secret.unavailable ? (
              <p className="muted" data-testid={`secret-unavailable-${c.id}`}>
                Not used until its secret can be read: {c.secret.unavailable}. It is read again every few seconds.
              </p>
            ) : null}
            {c.unconfirmed.length > 0 ? (
              <p className="muted" data-testid={`unconfirmed-${c.id}`}>
                Not used until you confirm: it would send {describePairs(c.unconfirmed)}, which you never confirmed.
              </p>
            ) : null}
            {editingCredential === c.id ? (
              <CredentialEditor provider={provider.id} destination={provider.effective_base_url} credential={c} onSaved={onChanged} onCancel={() => setEditingCredential(null)} />
            ) : null}
          </li>
        ))}
      </ul>
      {addingCredential ? (
        <CredentialEditor
          provider={provider.id}
          destination={provider.effective_base_url}
          credential={null}
          onSaved={() => {
            setAddingCredential(false);
            onChanged();
          }}
          onCancel={() => setAddingCredential(false)}
        />
      ) : (
        <button type="button" className="secondary" onClick={() => setAddingCredential(true)}>
          Add credential
        </button>
      )}
    </article>
  );
}

function ProviderEditor({ provider, onSaved, onCancel }: { provider: ProviderView | null; onSaved: () => void; onCancel: () => void }) {
  const api = useApi();
  const creating = provider === null;
  const [draft, setDraft] = useState<ProviderDraft>(provider ? providerDraftOf(provider) : emptyProvider);
  const [touched, setTouched] = useState(false);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const checked = checkProviderDraft(draft, creating, provider?.models ?? []);
  const errorOf = (field: string) => (touched ? checked.errors[field] : undefined) ?? serverErrors[field] ?? null;
  const edit = <K extends keyof ProviderDraft>(field: K, value: ProviderDraft[K]) => {
    setDraft({ ...draft, [field]: value });
    const { [field]: _gone, ...rest } = serverErrors;
    setServerErrors(rest);
  };

  const save = useAction(async () => {
    if (!checked.value) return;
    try {
      // The user typed the base URL in this form: where its requests go is their own choice.
      if (provider === null) {
        await api.createProvider(checked.value, { confirm: true });
      } else {
        const patch = providerPatch(provider, checked.value);
        if (!isEmptyPatch(patch)) await api.patchProvider(provider.id, patch, { confirm: true });
      }
      onSaved();
    } catch (error) {
      const placed = placeError(error, PROVIDER_FIELDS);
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setTouched(true);
    if (checked.value) void save.run();
  };
  const prefix = provider ? `provider-${provider.id}` : 'provider-new';

  return (
    <form className="card inset form-grid" onSubmit={submit} noValidate aria-label={creating ? 'New provider' : `Edit provider ${provider.id}`}>
      {creating ? <h2>New provider</h2> : null}
      {creating ? (
        <TextField id={`${prefix}-id`} label="Provider name" value={draft.id} onChange={(e) => edit('id', e.target.value)} error={errorOf('id')} hint="How combos and logs name it, e.g. openai or groq-personal" autoComplete="off" />
      ) : null}
      <SelectField
        id={`${prefix}-kind`}
        label="Kind"
        value={draft.kind}
        onChange={(e) => edit('kind', e.target.value as ProviderKind)}
        disabled={!creating}
        hint={creating ? 'The API dialect it speaks' : 'The kind cannot change; add a new provider instead'}
        error={errorOf('kind')}
      >
        <option value="openai">OpenAI compatible</option>
        <option value="anthropic">Anthropic</option>
        <option value="gemini">Gemini</option>
      </SelectField>
      {draft.kind === 'openai' ? (
        <SelectField
          id={`${prefix}-api`}
          label="API"
          value={draft.api}
          onChange={(e) => edit('api', e.target.value as OpenAiApi)}
          hint="Where requests go unless a model names its own API"
          error={errorOf('api')}
        >
          <option value="chat">Chat Completions</option>
          <option value="responses">Responses</option>
        </SelectField>
      ) : null}
      <CheckField
        id={`${prefix}-passthrough`}
        label="Pass through same-dialect requests"
        checked={draft.passthrough}
        onChange={(e) => edit('passthrough', e.target.checked)}
        hint="A client speaking this provider's API is forwarded as it sent the request; off re-encodes every request, for hosts that refuse unknown fields"
        error={errorOf('passthrough')}
      />
      <TextField
        id={`${prefix}-base-url`}
        label="Base URL"
        type="url"
        value={draft.base_url}
        onChange={(e) => edit('base_url', e.target.value)}
        placeholder="The kind's public endpoint"
        hint="Empty means the kind's public endpoint"
        error={errorOf('base_url')}
        autoComplete="off"
        spellCheck={false}
      />
      <SelectField id={`${prefix}-profile`} label="Breaker profile" value={draft.profile} onChange={(e) => edit('profile', e.target.value as '' | BreakerProfile)} error={errorOf('profile')}>
        <option value="">Default (API key)</option>
        <option value="api_key">API key</option>
        <option value="oauth">OAuth</option>
        <option value="local">Local (Ollama, LM Studio)</option>
      </SelectField>
      <SelectField
        id={`${prefix}-selection`}
        label="Credential selection"
        value={draft.selection}
        onChange={(e) => edit('selection', e.target.value as SelectionStrategy['strategy'])}
        error={errorOf('selection')}
      >
        <option value="fill_first">Fill first (by priority)</option>
        <option value="round_robin">Round robin</option>
        <option value="least_used">Least used</option>
        <option value="p2c">Power of two choices (latency)</option>
        <option value="random">Random</option>
      </SelectField>
      {draft.selection === 'round_robin' ? (
        <TextField id={`${prefix}-sticky`} label="Sticky for (requests)" inputMode="numeric" value={draft.sticky} onChange={(e) => edit('sticky', e.target.value)} />
      ) : null}
      <div className="field">
        <label htmlFor={`${prefix}-models`}>Models</label>
        <textarea
          id={`${prefix}-models`}
          rows={3}
          value={draft.models}
          onChange={(e) => edit('models', e.target.value)}
          aria-invalid={errorOf('models') ? true : undefined}
          aria-describedby={`${prefix}-models-hint`}
          spellCheck={false}
        />
        <div className="hint" id={`${prefix}-models-hint`}>
          One per line. Empty means any model the provider serves.
          {draft.kind === 'openai' ? ' Add “(responses)” or “(chat)” after a model to call it through that API: gpt-5-codex (responses).' : ''}
        </div>
        {errorOf('models') ? <div className="error" role="alert">{errorOf('models')}</div> : null}
      </div>
      <div className="field">
        <label htmlFor={`${prefix}-headers`}>Extra headers</label>
        <textarea
          id={`${prefix}-headers`}
          rows={2}
          value={draft.headers}
          onChange={(e) => edit('headers', e.target.value)}
          aria-invalid={errorOf('headers') ? true : undefined}
          aria-describedby={`${prefix}-headers-hint`}
          spellCheck={false}
        />
        <div className="hint" id={`${prefix}-headers-hint`}>
          One “Name: value” per line, sent with every request.
        </div>
        {errorOf('headers') ? <div className="error" role="alert">{errorOf('headers')}</div> : null}
      </div>
      <SaveActions
        busy={save.busy}
        label={creating ? 'Add provider' : 'Save provider'}
        error={save.error}
        onCancel={onCancel}
      />
    </form>
  );
}
