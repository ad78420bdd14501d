import { useState, type ChangeEvent } from 'react';
import type { ImportSummary } from '../bindings/ImportSummary';
import { useAction, useApi } from '../app/context';
import { Badge, BusyButton, CopyButton, ErrorNote } from './controls';
import { download } from '../app/download';
import { loginName } from '../format/login';

/**
 * Config export and import. An import is always checked first (a dry run), and what it would
 * send where shown: every destination its requests go to (a keyless provider sends prompts,
 * and the files an agent read, with no secret at all: issue 26), every (secret reference,
 * destination) pair (a shared file can point a secret the user holds at a host the user never
 * chose: issue 19) and its team database. The user decides with the list in view.
 */
export function ConfigTransfer() {
  const [importing, setImporting] = useState(false);
  return (
    <section className="card" aria-labelledby="config-heading">
      <h2 id="config-heading">Config file</h2>
      <p className="muted">
        The whole config as a file (secrets as references only, never their values): to back it up, or to move it to
        another machine.
      </p>
      <ExportConfig />
      {importing ? (
        <ImportDialog onClose={() => setImporting(false)} />
      ) : (
        <div className="row">
          <button type="button" className="secondary" onClick={() => setImporting(true)}>
            Import config…
          </button>
        </div>
      )}
    </section>
  );
}

function ExportConfig() {
  const api = useApi();
  const [toml, setToml] = useState<string | null>(null);
  const exportConfig = useAction(async () => {
    const text = await api.exportConfig();
    setToml(text);
    download('switchyard.toml', 'application/toml', text);
  });
  return (
    <>
      <div className="row">
        <BusyButton className="secondary" busy={exportConfig.busy} busyLabel="Exporting…" onClick={() => void exportConfig.run()}>
          Export config
        </BusyButton>
      </div>
      <ErrorNote error={exportConfig.error} />
      {toml !== null ? (
        <div className="note" role="status">
          <p>Saved as switchyard.toml in your downloads. The same text, to copy:</p>
          <textarea aria-label="Exported config" readOnly rows={8} value={toml} />
          <div className="row">
            <CopyButton text={toml} label="Copy config" />
            <button type="button" className="secondary small" onClick={() => setToml(null)}>
              Done
            </button>
          </div>
        </div>
      ) : null}
    </>
  );
}

/** A picked file's text (`FileReader`: jsdom's and older WebKit's `File` have no `text()`). */
function readText(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(new Error(`${file.name}: the file could not be read`));
    reader.readAsText(file);
  });
}

/** The text a dry run checked, and what the server said it would do. */
type Checked = { toml: string; summary: ImportSummary };

function ImportDialog({ onClose }: { onClose: () => void }) {
  const api = useApi();
  const [pasted, setPasted] = useState('');
  const [checked, setChecked] = useState<Checked | null>(null);
  const [imported, setImported] = useState<{ summary: ImportSummary; allowed: boolean } | null>(null);

  // A new file or text replaces the previous check: its summary no longer describes it.
  const check = useAction(async (source: string | Promise<string>) => {
    setChecked(null);
    const toml = await source;
    const summary = await api.importConfig(toml, { dry_run: true });
    setChecked({ toml, summary });
  });
  const apply = useAction(async (allow: boolean) => {
    if (checked === null) return;
    const summary = await api.importConfig(checked.toml, { confirm: allow });
    setImported({ summary, allowed: allow });
  });

  // Reading the file is part of the check, so a file that cannot be read says so like a refusal.
  const pick = (event: ChangeEvent<HTMLInputElement>) => {
    const file = event.target.files?.[0];
    if (!file) return;
    void check.run(readText(file).then((text) => {
      setPasted(text);
      return text;
    }));
  };

  const newPairs = checked?.summary.pairs.filter((p) => p.state === 'new') ?? [];

  if (imported !== null) {
    const benched = imported.summary.pairs.filter((p) => p.state === 'new');
    const logins = benched.filter((p) => p.reference !== null && loginName(p.reference) !== null);
    return (
      <div className="note note-ok" role="dialog" aria-label="Import config">
        <p>
          <strong>Imported:</strong> {count(imported.summary.providers, 'provider')}, {count(imported.summary.combos, 'combo')}.
        </p>
        {benched.length > 0 && !imported.allowed ? (
          <p>
            Providers whose requests or secrets would go to a new destination are benched (<code>unconfirmed</code>): no
            request goes there until you confirm them on the Providers page.
          </p>
        ) : null}
        {logins.map((p) => (
          <p key={`${p.reference} ${p.destination}`} data-testid="import-login-waiting">
            {capitalised(loginName(p.reference!)!)} is not sent to <code>{p.destination}</code> until you confirm{' '}
            {p.credentials.map((c) => c.split('/')[0]).join(', ')} on the Providers page.
          </p>
        ))}
        <div className="form-actions">
          <button type="button" onClick={onClose}>
            Close
          </button>
        </div>
      </div>
    );
  }

  return (
    <div className="note" role="dialog" aria-label="Import config">
      <p>
        Importing replaces the whole config. Pick a config file or paste its text; it is checked first, and nothing
        changes until you choose Import.
      </p>
      <div className="field">
        <label htmlFor="import-file">Config file</label>
        <input id="import-file" type="file" accept=".toml,application/toml,text/plain" onChange={pick} />
      </div>
      <div className="field">
        <label htmlFor="import-text">Or paste the config</label>
        <textarea
          id="import-text"
         
          rows={8}
          value={pasted}
          onChange={(e) => {
            setPasted(e.target.value);
            setChecked(null);
          }}
        />
      </div>
      <div className="row">
        <BusyButton className="secondary" busy={check.busy} busyLabel="Checking…" disabled={pasted.trim() === ''} onClick={() => void check.run(pasted)}>
          Check
        </BusyButton>
      </div>
      <ErrorNote error={check.error} title="This file cannot be imported; nothing changed" />
      {checked !== null ? <DryRun summary={checked.summary} /> : null}
      <ErrorNote error={apply.error} title="Not imported" />
      <div className="form-actions">
        {checked !== null ? (
          <>
            <BusyButton busy={apply.busy} busyLabel="Importing…" onClick={() => void apply.run(false)}>
              Import
            </BusyButton>
            {newPairs.length > 0 ? (
              <BusyButton className="secondary" busy={apply.busy} busyLabel="Importing…" onClick={() => void apply.run(true)}>
                Import and allow these destinations
              </BusyButton>
            ) : null}
          </>
        ) : null}
        <button type="button" className="secondary" disabled={apply.busy} onClick={onClose}>
          Cancel
        </button>
      </div>
    </div>
  );
}

function DryRun({ summary }: { summary: ImportSummary }) {
  const fresh = summary.pairs.filter((p) => p.state === 'new');
  const team = summary.team;
  return (
    <div data-testid="import-summary">
      <p>
        This file would replace the config with {count(summary.providers, 'provider')} and {count(summary.combos, 'combo')}.
      </p>
      {summary.pairs.length === 0 ? (
        <p className="muted">It sends no request anywhere: it has no provider.</p>
      ) : (
        <div className="table-wrap">
          <table className="table" aria-label="What it sends where">
            <thead>
              <tr>
                <th scope="col">Sends</th>
                <th scope="col">Destination host</th>
                <th scope="col">Sent by</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {summary.pairs.map((p) => (
                <tr key={`${p.reference ?? ''} ${p.destination}`} className={p.state === 'new' ? 'row-new' : undefined}>
                  <td>
                    {p.reference === null ? (
                      'Requests (prompts and what they carry)'
                    ) : loginName(p.reference) ? (
                      <strong>{capitalised(loginName(p.reference)!)}</strong>
                    ) : (
                      <code>{p.reference}</code>
                    )}
                  </td>
                  <td>
                    <code>{p.destination}</code>
                  </td>
                  <td>{p.credentials.join(', ')}</td>
                  <td>{p.state === 'new' ? <Badge tone="warn">new</Badge> : <Badge tone="muted">known</Badge>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {summary.waiting.length > 0 ? (
        <div className="note note-warn" data-testid="import-waiting">
          <p>These credentials cannot read their secret yet; they are imported and serve once they can:</p>
          <ul>
            {summary.waiting.map((w) => (
              <li key={w}>
                <code>{w}</code>
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {team ? (
        <p className={team.state === 'new' ? 'note note-warn' : 'muted'} data-testid="import-team">
          {team.state === 'new' ? 'New: ' : ''}from the next start, this instance would join the team database named by{' '}
          <code>{team.database_url}</code>
          {team.instance ? ` as ${team.instance}` : ''}: it shares health state with every instance there and trusts what
          they write.
        </p>
      ) : null}
      {fresh.length > 0 ? (
        <div className="note note-warn">
          {fresh.map((p) =>
            p.reference === null ? (
              <p key={` ${p.destination}`}>
                New: this would send your prompts, and whatever your tools put in them (files, environment, tool results), to{' '}
                <code>{p.destination}</code>, a host you never allowed; its answers reach your tools.
              </p>
            ) : loginName(p.reference) ? (
              <p key={`${p.reference} ${p.destination}`} data-testid="import-login">
                New: {loginName(p.reference)} will be sent to <code>{p.destination}</code>, not the subscription&apos;s own host.
                Only its provider&apos;s Confirm on the Providers page, which names it, sends it there: importing, with or
                without allowing destinations, does not.
              </p>
            ) : (
              <p key={`${p.reference} ${p.destination}`}>
                New: this would send the secret <code>{p.reference}</code> to <code>{p.destination}</code>, which you
                never allowed for it.
              </p>
            ),
          )}
          <p>
            Import keeps the providers that send there benched until you confirm them on the Providers page; Import and
            allow these destinations allows them now.
          </p>
        </div>
      ) : null}
    </div>
  );
}

function capitalised(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
