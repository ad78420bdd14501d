import { useState, type FormEvent } from 'react';
import type { ComboForm } from '../bindings/ComboForm';
import type { RouteStrategy } from '../bindings/RouteStrategy';
import type { TryResult } from '../bindings/TryResult';
import { useAction, useApi, useResource } from '../app/context';
import { Badge, BusyButton, ErrorNote, SaveActions, SelectField, TextField } from '../components/controls';
import { AliasesSection } from '../components/AliasesSection';
import { TraceView } from '../components/TraceView';
import { checkComboDraft, comboDraftOf, comboFields, emptyCombo, emptyTarget, move, targetField, type ComboDraft, type TargetDraft } from '../forms/comboForm';
import { placeError } from '../forms/fieldErrors';
import { continuationOf, modelOf, type ContinuationMechanism } from '../forms/providerForm';

const STRATEGIES: Array<[RouteStrategy, string]> = [
  ['priority', 'Priority (in order)'],
  ['weighted', 'Weighted'],
  ['round_robin', 'Round robin'],
  ['least_latency', 'Least latency'],
  ['cost', 'Cheapest first'],
  ['random', 'Random'],
  ['auto', 'Auto (ranked per request: health, quota, latency, price, fit)'],
];

/** `auto` and its presets: always there to try, whatever combos exist (issue 30). */
const AUTO_MODELS = ['auto', 'auto:fast', 'auto:cheap', 'auto:smart'];

export function CombosPage() {
  const api = useApi();
  const combos = useResource(() => api.combos(), [api]);
  const providers = useResource(() => api.providers(), [api]);
  const [editing, setEditing] = useState<string | null>(null); // a combo name, or '' for a new one
  const remove = useAction(async (name: string) => {
    if (!window.confirm(`Remove combo ${name}?`)) return;
    await api.deleteCombo(name);
    await combos.reload();
  });

  const knownTargets = (providers.data ?? []).flatMap((p) => p.models.map((m) => `${p.id}/${modelOf(m).id}`));
  const models = [...(combos.data ?? []).map((c) => c.name), ...knownTargets];

  return (
    <div className="page">
      <header className="page-head">
        <h1>Combos</h1>
        {editing === '' ? null : (
          <button type="button" onClick={() => setEditing('')}>
            New combo
          </button>
        )}
      </header>
      <p className="muted">A combo is a model name your tools ask for; Switchyard routes it across its targets, falling back when one fails.</p>
      <ErrorNote error={combos.error ?? remove.error} />
      <datalist id="known-targets">
        {knownTargets.map((t) => (
          <option key={t} value={t} />
        ))}
      </datalist>
      {editing === '' ? (
        <ComboEditor
          combo={null}
          onSaved={() => {
            setEditing(null);
            void combos.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      ) : null}
      {combos.data && combos.data.length === 0 && editing !== '' ? <p className="muted">No combo yet.</p> : null}
      <div className="cards">
        {(combos.data ?? []).map((combo) =>
          editing === combo.name ? (
            <ComboEditor
              key={combo.name}
              combo={combo}
              onSaved={() => {
                setEditing(null);
                void combos.reload();
              }}
              onCancel={() => setEditing(null)}
            />
          ) : (
            <article className="card" key={combo.name} aria-label={`Combo ${combo.name}`}>
              <div className="row spread">
                <h2>
                  {combo.name} <Badge tone="muted">{(combo.strategy ?? 'priority').replace(/_/g, ' ')}</Badge>
                </h2>
                <span className="row">
                  <button type="button" className="secondary small" onClick={() => setEditing(combo.name)} aria-label={`Edit combo ${combo.name}`}>
                    Edit
                  </button>
                  <button type="button" className="danger small" onClick={() => void remove.run(combo.name)} aria-label={`Remove combo ${combo.name}`}>
                    Remove
                  </button>
                </span>
              </div>
              <ol className="targets">
                {combo.targets.map((t, i) => (
                  <li key={i}>
                    <code>{t.target}</code>
                    {t.credential ? <span className="muted"> on {t.credential}</span> : null}
                    {t.weight !== undefined ? <span className="muted"> · weight {t.weight}</span> : null}
                    <ContinuationBadge mechanism={continuationOf(providers.data ?? [], t.target)} />
                  </li>
                ))}
              </ol>
            </article>
          ),
        )}
      </div>
      <AliasesSection routes={models} combos={combos.data} />
      <TryPanel models={models} />
    </div>
  );
}

const MECHANISMS: Record<Exclude<ContinuationMechanism, false>, string> = {
  anthropic: 'assistant prefill',
  prefix: 'prefix: true',
  partial: 'partial: true',
  vllm: 'continue_final_message',
};

/** Whether a target can finish an answer another target's broken stream began. */
function ContinuationBadge({ mechanism }: { mechanism: ContinuationMechanism | null }) {
  if (mechanism === null) return null;
  return mechanism === false ? (
    <>
      {' '}
      <Badge tone="muted">no continuation</Badge>
    </>
  ) : (
    <>
      {' '}
      <Badge tone="ok">continues by {MECHANISMS[mechanism]}</Badge>
    </>
  );
}

function ComboEditor({ combo, onSaved, onCancel }: { combo: ComboForm | null; onSaved: () => void; onCancel: () => void }) {
  const api = useApi();
  const [draft, setDraft] = useState<ComboDraft>(combo ? comboDraftOf(combo) : { ...emptyCombo, targets: [{ ...emptyTarget }] });
  const [touched, setTouched] = useState(false);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const checked = checkComboDraft(draft);
  const errorOf = (field: string) => (touched ? checked.errors[field] : undefined) ?? serverErrors[field] ?? null;
  const setTargets = (targets: TargetDraft[]) => {
    setDraft({ ...draft, targets });
    setServerErrors({});
  };
  const editTarget = (i: number, field: keyof TargetDraft, value: string) =>
    setTargets(draft.targets.map((t, j) => (j === i ? { ...t, [field]: value } : t)));

  const save = useAction(async () => {
    if (!checked.value) return;
    try {
      if (combo === null) await api.createCombo(checked.value);
      else await api.replaceCombo(combo.name, checked.value);
      onSaved();
    } catch (error) {
      const placed = placeError(error, comboFields(draft));
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setTouched(true);
    if (checked.value) void save.run();
  };
  const id = combo ? `combo-${combo.name}` : 'combo-new';
  const weighted = draft.strategy === 'weighted';

  return (
    <form className="card inset" onSubmit={submit} noValidate aria-label={combo ? `Edit combo ${combo.name}` : 'New combo'}>
      <h2>{combo ? `Edit ${combo.name}` : 'New combo'}</h2>
      <div className="form-grid">
        <TextField id={`${id}-name`} label="Combo name" value={draft.name} onChange={(e) => setDraft({ ...draft, name: e.target.value })} error={errorOf('name')} hint="The model name clients ask for" autoComplete="off" />
        <SelectField id={`${id}-strategy`} label="Strategy" value={draft.strategy} onChange={(e) => setDraft({ ...draft, strategy: e.target.value as RouteStrategy })} error={errorOf('strategy')}>
          {STRATEGIES.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </SelectField>
        <TextField
          id={`${id}-hedge`}
          label="Hedge a slow first token after"
          placeholder="off"
          value={draft.hedge}
          onChange={(e) => {
            setDraft({ ...draft, hedge: e.target.value });
            setServerErrors({});
          }}
          error={errorOf('hedge_after') ?? errorOf('hedge_after_ms')}
          hint="p95 (of the target's recent times to first token) or milliseconds; blank never hedges. A hedge starts the next target on another provider too; the first answer wins."
          autoComplete="off"
          spellCheck={false}
        />
      </div>
      <fieldset className="targets-editor">
        <legend>Targets, in order</legend>
        {errorOf('targets') ? <div className="error" role="alert">{errorOf('targets')}</div> : null}
        {draft.targets.map((t, i) => {
          const n = i + 1;
          const rowError = serverErrors[`targets[${i}]`];
          return (
            <div className="target-row" key={i} data-testid="target-row">
              <span className="target-index" aria-hidden="true">
                {n}
              </span>
              <TextField
                id={`${id}-t${i}-target`}
                label={`Target ${n}`}
                list="known-targets"
                placeholder="provider/model"
                value={t.target}
                onChange={(e) => editTarget(i, 'target', e.target.value)}
                error={errorOf(targetField(i, 'target'))}
                autoComplete="off"
                spellCheck={false}
              />
              <TextField id={`${id}-t${i}-credential`} label={`Credential ${n}`} placeholder="any" value={t.credential} onChange={(e) => editTarget(i, 'credential', e.target.value)} error={errorOf(targetField(i, 'credential'))} autoComplete="off" />
              <TextField
                id={`${id}-t${i}-weight`}
                label={`Weight ${n}`}
                inputMode="numeric"
                placeholder={weighted ? '1' : 'unused'}
                value={t.weight}
                onChange={(e) => editTarget(i, 'weight', e.target.value)}
                error={errorOf(targetField(i, 'weight'))}
              />
              <TextField
                id={`${id}-t${i}-context`}
                label={`Context window ${n}`}
                inputMode="numeric"
                placeholder="tokens"
                value={t.context_window}
                onChange={(e) => editTarget(i, 'context_window', e.target.value)}
                error={errorOf(targetField(i, 'context_window'))}
              />
              <div className="row target-actions">
                <button type="button" className="secondary small" aria-label={`Move target ${n} up`} disabled={i === 0} onClick={() => setTargets(move(draft.targets, i, -1))}>
                  ↑
                </button>
                <button type="button" className="secondary small" aria-label={`Move target ${n} down`} disabled={i === draft.targets.length - 1} onClick={() => setTargets(move(draft.targets, i, 1))}>
                  ↓
                </button>
                <button type="button" className="danger small" aria-label={`Remove target ${n}`} onClick={() => setTargets(draft.targets.filter((_, j) => j !== i))}>
                  ✕
                </button>
              </div>
              {rowError ? <div className="error" role="alert">{rowError}</div> : null}
            </div>
          );
        })}
        <button type="button" className="secondary" onClick={() => setTargets([...draft.targets, { ...emptyTarget }])}>
          Add target
        </button>
      </fieldset>
      <SaveActions
        busy={save.busy}
        label={combo ? 'Save combo' : 'Create combo'}
        error={save.error}
        onCancel={onCancel}
      />
    </form>
  );
}

function TryPanel({ models }: { models: string[] }) {
  const api = useApi();
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('Say hello in five words.');
  const [result, setResult] = useState<TryResult | null>(null);
  const send = useAction(async () => {
    setResult(null);
    setResult(await api.tryModel({ model: model || models[0] || '', prompt }));
  });
  const chosen = model || models[0] || '';
  const decision = result?.trace.find((e) => e.event === 'ranked' && e.decision !== undefined);
  return (
    <section className="card" aria-labelledby="try-title">
      <h2 id="try-title">Try it</h2>
      <form
        className="form-grid"
        onSubmit={(e) => {
          e.preventDefault();
          void send.run();
        }}
      >
        <SelectField id="try-model" label="Model" value={chosen} onChange={(e) => setModel(e.target.value)} disabled={models.length === 0}>
          {[...models, ...AUTO_MODELS.filter((m) => !models.includes(m))].map((m) => (
            <option key={m} value={m}>
              {m}
            </option>
          ))}
        </SelectField>
        <div className="field wide">
          <label htmlFor="try-prompt">Prompt</label>
          <textarea id="try-prompt" rows={3} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
        </div>
        <div className="form-actions">
          <BusyButton type="submit" busy={send.busy} busyLabel="Sending…" disabled={chosen === '' || prompt.trim() === ''}>
            Send
          </BusyButton>
        </div>
      </form>
      <ErrorNote error={send.error} title="Could not try" />
      {result ? (
        <div className="try-result" data-testid="try-result">
          <div className="row">
            <Badge tone={result.status >= 200 && result.status < 300 ? 'ok' : 'bad'}>HTTP {result.status}</Badge>
            <span className="muted">
              {result.served_by ? `served by ${result.served_by}` : 'not served'} · {result.attempts} attempt{result.attempts === 1 ? '' : 's'} · {result.latency_ms} ms
            </span>
          </div>
          {result.answer !== null ? <blockquote className="answer">{result.answer}</blockquote> : null}
          {decision && decision.event === 'ranked' ? (
            <p data-testid="try-decision">
              Why this one: <code>{decision.decision}</code>
            </p>
          ) : null}
          {result.error ? (
            <div className="note note-error" role="alert">
              {result.error.message}
            </div>
          ) : null}
          <h3>Routing trace</h3>
          <TraceView trace={result.trace} servedBy={result.served_by} label="Try routing trace" />
        </div>
      ) : null}
    </section>
  );
}
