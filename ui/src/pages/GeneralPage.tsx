import { useState, type FormEvent } from 'react';
import type { NewLocalKey } from '../bindings/NewLocalKey';
import { autostart, headlessCommand, insideDesktop } from '../api/ipc';
import { useAction, useApi, useNow, useResource } from '../app/context';
import { useTheme, type Theme } from '../app/theme';
import { ConfigTransfer } from '../components/ConfigTransfer';
import { Badge, BusyButton, CheckField, CopyButton, ErrorNote, TextField } from '../components/controls';
import { SectionEditor } from '../components/SectionEditor';
import { placeError } from '../forms/fieldErrors';
import { formatAgo } from '../format/duration';

export function GeneralPage() {
  const desktop = insideDesktop();
  return (
    <div className="page">
      <header className="page-head">
        <h1>General</h1>
      </header>
      <SectionEditor
        section="server"
        title="Server"
        description="The port takes effect at the next start."
        groups={[{ fields: [{ path: 'port', label: 'Port', kind: 'int', hint: '127.0.0.1 only' }] }]}
      />
      <SectionEditor
        section="team"
        title="Team"
        description="Share breaker, cooldown and lockout state with other Switchyard instances through PostgreSQL (docs/team.md). Write where the URL is (env:VAR or keychain:team/database), never the URL itself: it holds a password. Takes effect at the next start."
        groups={[
          {
            fields: [
              { path: 'database_url', label: 'Database URL reference', kind: 'text', hint: 'e.g. env:SWITCHYARD_TEAM_DB; empty: no team' },
              { path: 'instance', label: 'Instance name', kind: 'optional-text', hint: 'unique in the team; default: host name and a random suffix' },
            ],
          },
        ]}
      />
      <LocalKeys />
      <SectionEditor
        section="notifications"
        title="Notifications"
        description="Desktop notifications, shown by the desktop app."
        groups={[
          {
            fields: [
              { path: 'breaker_open', label: 'When a provider’s breaker opens', kind: 'bool' },
              { path: 'fallback', label: 'When a request falls back to another target', kind: 'bool' },
            ],
          },
        ]}
      />
      <ConfigTransfer />
      {desktop ? <StartAtLogin /> : null}
      {desktop ? <RunHeadless /> : null}
      <ThemePicker />
    </div>
  );
}

function LocalKeys() {
  const api = useApi();
  const now = useNow(30_000);
  const keys = useResource(() => api.keys(), [api]);
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string | null>(null);
  const [created, setCreated] = useState<NewLocalKey | null>(null);
  const create = useAction(async () => {
    try {
      setCreated(await api.createKey(name.trim()));
      setName('');
      await keys.reload();
    } catch (error) {
      const placed = placeError(error, ['name']);
      setNameError(placed.fields.name ?? null);
      if (placed.form !== null) throw error;
    }
  });
  const revoke = useAction(async (id: string, label: string) => {
    if (!window.confirm(`Revoke key ${label}? Tools using it stop working.`)) return;
    await api.revokeKey(id);
    await keys.reload();
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (name.trim() === '') {
      setNameError('Name the key, e.g. the tool that will use it');
      return;
    }
    setNameError(null);
    void create.run();
  };

  return (
    <section className="card" aria-labelledby="keys-heading">
      <h2 id="keys-heading">Local API keys</h2>
      <p className="muted">Tools send one of these to /v1 as their API key.</p>
      <form className="row align-end" onSubmit={submit} noValidate>
        <TextField label="New key name" value={name} onChange={(e) => setName(e.target.value)} error={nameError} autoComplete="off" />
        <BusyButton type="submit" busy={create.busy} busyLabel="Creating…">
          Create key
        </BusyButton>
      </form>
      <ErrorNote error={create.error ?? revoke.error ?? keys.error} />
      {created ? (
        <div className="note note-ok new-key" role="status">
          <p>
            <strong>Key “{created.name}” created.</strong> Copy it now: it is shown only this once.
          </p>
          <div className="row">
            <code data-testid="new-key">{created.key}</code>
            <CopyButton text={created.key} label="Copy key" />
            <button type="button" className="secondary small" onClick={() => setCreated(null)}>
              Done
            </button>
          </div>
        </div>
      ) : null}
      {keys.data && keys.data.length > 0 ? (
        <table className="table" aria-label="Local API keys">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Created</th>
              <th scope="col">State</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.data.map((k) => (
              <tr key={k.id}>
                <td>{k.name}</td>
                <td>
                  <code>{k.hint}</code>
                </td>
                <td>{formatAgo(k.created_at, now)}</td>
                <td>{k.revoked_at === null ? <Badge tone="ok">active</Badge> : <Badge tone="muted">revoked</Badge>}</td>
                <td>
                  {k.revoked_at === null ? (
                    <button type="button" className="danger small" disabled={revoke.busy} onClick={() => void revoke.run(k.id, k.name)} aria-label={`Revoke key ${k.name}`}>
                      Revoke
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : keys.data ? (
        <p className="muted">No key yet.</p>
      ) : null}
    </section>
  );
}

function StartAtLogin() {
  const enabled = useResource(() => autostart.get(), []);
  const toggle = useAction(async (next: boolean) => {
    await autostart.set(next);
    await enabled.reload();
  });
  return (
    <section className="card" aria-labelledby="autostart-heading">
      <h2 id="autostart-heading">Start at login</h2>
      <CheckField
        label="Start Switchyard when I log in"
        checked={enabled.data ?? false}
        disabled={enabled.data === undefined || toggle.busy}
        onChange={(e) => void toggle.run(e.target.checked)}
      />
      <ErrorNote error={enabled.error ?? toggle.error} />
    </section>
  );
}

function RunHeadless() {
  const headless = useResource(() => headlessCommand(), []);
  return (
    <section className="card" aria-labelledby="headless-heading">
      <h2 id="headless-heading">Run headless</h2>
      <p className="muted">
        The same config, served without the window (on a server, in a terminal session). Quit the app first: both use
        the same data directory and port.
      </p>
      {headless.data ? (
        <>
          <div className="row">
            <code data-testid="headless-command">{headless.data.command}</code>
            <CopyButton text={headless.data.command} label="Copy command" />
          </div>
          {headless.data.cli_found ? null : (
            <p className="muted">
              The <code>switchyard</code> command-line tool is not beside this app (a development build); the installers
              put it there.
            </p>
          )}
        </>
      ) : null}
      <ErrorNote error={headless.error} />
    </section>
  );
}

function ThemePicker() {
  const [theme, setTheme] = useTheme();
  const options: Array<[Theme, string]> = [
    ['system', 'Same as the system'],
    ['light', 'Light'],
    ['dark', 'Dark'],
  ];
  return (
    <section className="card" aria-labelledby="theme-heading">
      <h2 id="theme-heading">Theme</h2>
      <fieldset className="radios inline">
        <legend className="sr-only">Theme</legend>
        {options.map(([value, label]) => (
          <label key={value}>
            <input type="radio" name="theme" value={value} checked={theme === value} onChange={() => setTheme(value)} /> {label}
          </label>
        ))}
      </fieldset>
    </section>
  );
}
