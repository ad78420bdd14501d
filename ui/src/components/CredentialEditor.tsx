import { useEffect, useRef, useState, type FormEvent } from 'react';
import type { CredentialInput } from '../bindings/CredentialInput';
import type { CredentialKind } from '../bindings/CredentialKind';
import type { CredentialPatch } from '../bindings/CredentialPatch';
import type { LoginStatus } from '../bindings/LoginStatus';
import type { ProviderCredential } from '../bindings/ProviderCredential';
import { useAction, useApi } from '../app/context';
import { placeError } from '../forms/fieldErrors';
import { parseWhole } from '../forms/lockoutForm';
import { BusyButton, CheckField, ErrorNote, SelectField, TextField } from './controls';
import { SecretField } from './SecretField';

const FIELDS = ['id', 'kind', 'enabled', 'priority', 'secret', 'secret_ref'] as const;

type Source = 'keychain' | 'env';

function envVarOf(reference: string | null | undefined): string {
  return reference?.startsWith('env:') ? reference.slice(4) : '';
}

/**
 * Adds a credential, or edits one. The secret is write-only: typed here, sent once, never
 * shown; an empty secret field leaves the stored one as it is. A key can also live in an
 * environment variable (`env:VAR`), the way for headless servers without a keychain.
 */
export function CredentialEditor({
  provider,
  destination,
  credential,
  onSaved,
  onCancel,
}: {
  provider: string;
  /** Where the provider sends its secrets (its base URL), shown beside a reference the user types. */
  destination?: string;
  credential: ProviderCredential | null;
  onSaved: (credential: ProviderCredential) => void;
  onCancel?: () => void;
}) {
  const api = useApi();
  const initialSource: Source = credential?.secret.reference?.startsWith('env:') ? 'env' : 'keychain';
  const [id, setId] = useState(credential?.id ?? '');
  const [kind, setKind] = useState<CredentialKind>(credential?.kind ?? 'api_key');
  const [enabled, setEnabled] = useState(credential?.enabled ?? true);
  const [priority, setPriority] = useState(String(credential?.priority ?? 0));
  const [source, setSource] = useState<Source>(initialSource);
  const [secret, setSecret] = useState('');
  const [envVar, setEnvVar] = useState(envVarOf(credential?.secret.reference));
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saved, setSaved] = useState(false);

  const priorityValue = parseWhole(priority);
  const clientErrors: Record<string, string> = {};
  if (credential === null && id.trim() === '') clientErrors.id = 'Name the credential';
  if (priorityValue === null) clientErrors.priority = 'Enter a whole number';
  if (source === 'env' && kind === 'api_key' && envVar !== '' && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(envVar)) {
    clientErrors.secret_ref = 'A variable name: letters, digits and _';
  }
  const errorOf = (field: string) => clientErrors[field] ?? errors[field] ?? null;

  const save = useAction(async () => {
    setErrors({});
    try {
      let result: ProviderCredential;
      if (credential === null) {
        const input: CredentialInput = { id: id.trim(), kind, enabled, priority: priorityValue ?? 0 };
        if (kind === 'api_key' && source === 'keychain' && secret !== '') input.secret = secret;
        if (kind === 'api_key' && source === 'env' && envVar !== '') {
          // Typed here, beside where it goes: the user's own entry confirms the pair
          // (docs/security.md, secrets and destinations).
          input.secret_ref = `env:${envVar}`;
          input.confirm = true;
        }
        result = await api.createCredential(provider, input);
      } else {
        const patch: CredentialPatch = {};
        if (kind !== credential.kind) patch.kind = kind;
        if (enabled !== credential.enabled) patch.enabled = enabled;
        if (priorityValue !== null && priorityValue !== credential.priority) patch.priority = priorityValue;
        if (kind === 'api_key' && source === 'keychain' && secret !== '') patch.secret = secret;
        if (kind === 'api_key' && source === 'env' && envVar !== '' && `env:${envVar}` !== credential.secret.reference) {
          patch.secret_ref = `env:${envVar}`;
          patch.confirm = true;
        }
        result = Object.keys(patch).length === 0 ? credential : await api.patchCredential(provider, credential.id, patch);
      }
      setSecret('');
      setSaved(true);
      onSaved(result);
    } catch (error) {
      const placed = placeError(error, FIELDS);
      setErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (Object.keys(clientErrors).length === 0) void save.run();
  };
  const base = credential ? `cred-${provider}-${credential.id}` : `cred-${provider}-new`;

  return (
    <form className="card inset form-grid" onSubmit={submit} noValidate aria-label={credential ? `Credential ${credential.id}` : 'New credential'}>
      {credential === null ? (
        <TextField id={`${base}-id`} label="Credential name" value={id} onChange={(e) => setId(e.target.value)} error={errorOf('id')} autoComplete="off" />
      ) : (
        <h4>{credential.id}</h4>
      )}
      <SelectField id={`${base}-kind`} label="Kind" value={kind} onChange={(e) => setKind(e.target.value as CredentialKind)} error={errorOf('kind')}>
        <option value="api_key">API key</option>
        <option value="oauth">OAuth sign-in</option>
      </SelectField>
      <CheckField id={`${base}-enabled`} label="Enabled" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} error={errorOf('enabled')} />
      <TextField
        id={`${base}-priority`}
        label="Priority"
        inputMode="numeric"
        hint="Lower goes first"
        value={priority}
        onChange={(e) => setPriority(e.target.value)}
        error={errorOf('priority')}
      />
      {kind === 'api_key' ? (
        <>
          <fieldset className="field radios">
            <legend>Where the key is kept</legend>
            <label>
              <input type="radio" name={`${base}-source`} checked={source === 'keychain'} onChange={() => setSource('keychain')} /> OS keychain
            </label>
            <label>
              <input type="radio" name={`${base}-source`} checked={source === 'env'} onChange={() => setSource('env')} /> Environment variable
            </label>
          </fieldset>
          {source === 'keychain' ? (
            <SecretField
              id={`${base}-secret`}
              label="API key"
              current={credential?.secret ?? null}
              value={secret}
              onChange={(value) => {
                setSecret(value);
                setSaved(false);
              }}
              error={errorOf('secret')}
            />
          ) : (
            <TextField
              id={`${base}-env`}
              label="Variable name"
              hint={
                destination === undefined
                  ? 'The variable must be set where switchyard runs'
                  : `The variable must be set where switchyard runs; its value is sent to ${destination}`
              }
              value={envVar}
              onChange={(e) => setEnvVar(e.target.value)}
              error={errorOf('secret_ref')}
              autoComplete="off"
              spellCheck={false}
            />
          )}
        </>
      ) : credential ? (
        <OAuthSignIn provider={provider} credential={credential.id} />
      ) : (
        <p className="hint">Save the credential, then sign in.</p>
      )}
      <div className="form-actions">
        <BusyButton type="submit" busy={save.busy} busyLabel="Saving…">
          {credential ? 'Save credential' : 'Add credential'}
        </BusyButton>
        {onCancel ? (
          <button type="button" className="secondary" onClick={onCancel}>
            Cancel
          </button>
        ) : null}
        {saved && !save.busy ? (
          <span className="ok-text" role="status">
            Saved
          </span>
        ) : null}
      </div>
      <ErrorNote error={save.error} title="Not saved" />
    </form>
  );
}

/** Starts an OAuth login, opens the identity provider, and polls until it ends. */
function OAuthSignIn({ provider, credential }: { provider: string; credential: string }) {
  const api = useApi();
  const [status, setStatus] = useState<LoginStatus | null>(null);
  const [login, setLogin] = useState<number | null>(null);
  const poll = useRef<ReturnType<typeof setInterval> | undefined>(undefined);
  useEffect(() => () => clearInterval(poll.current), []);

  const start = useAction(async () => {
    const started = await api.startLogin(provider, credential);
    setLogin(started.id);
    setStatus({ status: 'pending' });
    window.open(started.authorization_url, '_blank', 'noopener');
    clearInterval(poll.current);
    poll.current = setInterval(() => {
      api
        .loginStatus(started.id)
        .then((next) => {
          setStatus(next);
          if (next.status !== 'pending') clearInterval(poll.current);
        })
        .catch(() => clearInterval(poll.current));
    }, 1000);
  });
  const pending = status?.status === 'pending';
  return (
    <div className="field">
      <div className="row">
        <BusyButton busy={start.busy || pending} busyLabel="Waiting for sign-in…" onClick={() => void start.run()}>
          Sign in
        </BusyButton>
        {pending && login !== null ? (
          <button
            type="button"
            className="secondary"
            onClick={() => {
              clearInterval(poll.current);
              void api.abandonLogin(login).finally(() => setStatus(null));
            }}
          >
            Cancel sign-in
          </button>
        ) : null}
      </div>
      {status?.status === 'succeeded' ? <span className="ok-text" role="status">Signed in</span> : null}
      {status?.status === 'failed' ? <div className="error" role="alert">Sign-in failed: {status.reason}</div> : null}
      <ErrorNote error={start.error} />
    </div>
  );
}
