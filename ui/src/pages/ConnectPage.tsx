import { useState } from 'react';
import type { ConnectGuide } from '../bindings/ConnectGuide';
import type { ConnectTool } from '../bindings/ConnectTool';
import { useAction, useApi, useResource } from '../app/context';
import { BusyButton, CheckField, CopyButton, ErrorNote, SelectField } from '../components/controls';

/**
 * The guides to show: each tool's lines with its own key where one was created here, else
 * with the placeholder. `POST /api/connect` fills one key into every tool's lines, so a tool
 * with a key of its own takes its guide from the answer made with that key.
 */
export async function guidesFor(
  connect: (request: { model?: string; key?: string }) => Promise<ConnectGuide[]>,
  model: string | undefined,
  keys: Partial<Record<ConnectTool, string>>,
): Promise<ConnectGuide[]> {
  const base = await connect(model === undefined ? {} : { model });
  const own = await Promise.all(
    Object.entries(keys).map(async ([tool, key]) => {
      const guides = await connect(model === undefined ? { key } : { model, key });
      return guides.find((g) => g.tool === tool);
    }),
  );
  return base.map((g) => own.find((o) => o?.tool === g.tool) ?? g);
}

/** `title`, or `title (2)`, `title (3)`… when a live key already has that name. */
export function freeKeyName(title: string, live: readonly string[]): string {
  let name = title;
  for (let n = 2; live.includes(name); n += 1) name = `${title} (${n})`;
  return name;
}

function Guide({
  guide,
  hasKey,
  onCreateKey,
  creating,
}: {
  guide: ConnectGuide;
  hasKey: boolean;
  onCreateKey: () => void;
  creating: boolean;
}) {
  const titleId = `connect-${guide.tool}`;
  // "Keep your subscription" (Claude Code, Codex): the tool keeps its own login and sends the
  // local key beside it; the server gives those lines with the guide.
  const [subscribed, setSubscribed] = useState(false);
  const lines = subscribed && guide.subscription ? guide.subscription : guide;
  const flag = subscribed ? ' --subscription' : '';
  return (
    <section className="card" aria-labelledby={titleId} data-testid={`guide-${guide.tool}`}>
      <div className="section-head">
        <h2 id={titleId}>{guide.title}</h2>
        {guide.reachable ? (
          hasKey ? (
            <span className="ok-text">Its own key is filled in</span>
          ) : (
            <BusyButton className="secondary small" busy={creating} busyLabel="Creating…" onClick={onCreateKey}>
              Create a key for {guide.title}
            </BusyButton>
          )
        ) : null}
      </div>
      {guide.reachable ? null : (
        <div className="note note-warn" role="note">
          {guide.note}
        </div>
      )}
      {guide.subscription ? (
        <CheckField
          label="Keep your subscription"
          checked={subscribed}
          onChange={(e) => setSubscribed(e.target.checked)}
          hint={`${guide.title} keeps its own login (your plan), which Switchyard passes only to the subscription's provider; the local key goes beside it in x-switchyard-key. When the plan's window runs out, the combo's next target answers until the reset.`}
        />
      ) : null}
      {lines.snippets.map((snippet, index) => (
        <div key={`${subscribed ? 'subscription' : 'key'}-${index}`}>
          <div className="row">
            <span className="muted">{snippet.label}</span>
            <CopyButton text={snippet.text} label={`Copy ${guide.title} lines (${snippet.label})`} />
          </div>
          <pre className="snippet" data-language={snippet.language}>
            {snippet.text}
          </pre>
        </div>
      ))}
      {guide.reachable && lines.note ? <p className="muted">{lines.note}</p> : null}
      {lines.writes ? (
        <p className="muted">
          Or let the CLI edit <code>{lines.writes}</code>: <code>{`switchyard connect ${guide.tool}${flag} --write`}</code>
        </p>
      ) : null}
    </section>
  );
}

/**
 * "Connect your tools": every tool the server knows, with this endpoint, a combo and a key
 * filled in. "Create a key for …" makes a local key named after the tool, so each tool can be
 * revoked alone; the key is shown here only, as the key API shows it once.
 */
export function ConnectPage() {
  const api = useApi();
  const combos = useResource(() => api.combos(), [api]);
  const [model, setModel] = useState<string | undefined>(undefined);
  const [keys, setKeys] = useState<Partial<Record<ConnectTool, string>>>({});
  const guides = useResource(() => guidesFor(api.connect, model, keys), [api, model, keys]);
  const [creatingFor, setCreatingFor] = useState<ConnectTool | null>(null);
  const createKey = useAction(async (guide: ConnectGuide) => {
    setCreatingFor(guide.tool);
    try {
      // Live key names are unique: a second key for the same tool gets "(2)", "(3)"…
      const live = (await api.keys()).filter((k) => k.revoked_at === null).map((k) => k.name);
      const created = await api.createKey(freeKeyName(guide.title, live));
      setKeys((now) => ({ ...now, [guide.tool]: created.key }));
    } finally {
      setCreatingFor(null);
    }
  });
  const names = (combos.data ?? []).map((c) => c.name);
  return (
    <div className="page">
      <header className="page-head">
        <h1>Connect your tools</h1>
      </header>
      <p className="muted">
        Paste these lines where each tool says. Every tool talks to this machine's endpoint; the model is a combo, so
        fallbacks happen here, not in the tool.
      </p>
      <div className="filters">
        <SelectField
          label="Combo"
          value={model ?? names[0] ?? ''}
          onChange={(e) => setModel(e.target.value)}
          hint={names.length === 0 ? 'No combo yet: the lines name a placeholder model.' : undefined}
        >
          {names.length === 0 ? <option value="">(none)</option> : null}
          {names.map((name) => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </SelectField>
      </div>
      <ErrorNote error={combos.error ?? guides.error} title="Cannot read the lines" />
      <ErrorNote error={createKey.error} title="Cannot create a key" />
      {(guides.data ?? []).map((guide) => (
        <Guide
          key={guide.tool}
          guide={guide}
          hasKey={keys[guide.tool] !== undefined}
          creating={creatingFor === guide.tool}
          onCreateKey={() => void createKey.run(guide)}
        />
      ))}
    </div>
  );
}
