import { useMemo, useState, type ReactNode } from 'react';
import type { GroupBy } from '../bindings/GroupBy';
import type { HeadroomView } from '../bindings/HeadroomView';
import type { UsageQuery } from '../bindings/UsageQuery';
import type { UsageReport } from '../bindings/UsageReport';
import { download } from '../app/download';
import { useAction, useApi, useLiveVersion, useNow, useRequestsVersion, useResource } from '../app/context';
import { BudgetAlerts, BudgetMeters } from '../components/BudgetNotes';
import { BusyButton, CopyButton, ErrorNote, Figures, TextField } from '../components/controls';
import { HeadroomBars, headroomLabel } from '../components/Headroom';
import { UsageChart } from '../components/UsageChart';
import { placeError } from '../forms/fieldErrors';
import { formatLatency } from '../format/duration';
import { abbreviate, formatDollars, formatUsdExact, totalTokens } from '../format/usage';
import { activityChart, dollarTicks, isEmptyChart, latencies, stackedChart, topKeys, type KeySpend, type Latency } from '../usage/chart';
import { hourlyRange, isRangeError, RANGES, resolveRange, type DayRange, type RangeChoice } from '../usage/range';

type StackBy = Extract<GroupBy, 'model' | 'provider'>;

/** The reports one view of the page is drawn from. */
type Views = {
  /** By the range's bucket, one series per model or provider: spend, tokens, totals, the CSV. */
  stacked: UsageReport;
  /** One series per provider: time to first token. */
  byProvider: UsageReport;
  /** One series per local key: top keys. */
  byKey: UsageReport;
  /** One series per agent session: what each agent task cost. */
  bySession: UsageReport;
  /** By the hour where the server keeps hours for the range (31 days), else by the day. */
  activity: UsageReport;
};

const count = (n: number) => n.toLocaleString('en-US');

function queryOf(range: DayRange, stackBy: StackBy): UsageQuery {
  return { from: range.from, to: range.to, bucket: range.bucket, group_by: stackBy };
}

/**
 * Each subscription's windows (issue 28): a subscriber's own login passed through is counted in
 * tokens here and covered by the plan, so what matters is how much of each window is used and
 * when it refills, as the plan's own answers say.
 */
function Subscriptions({ views, now }: { views: HeadroomView[]; now: number }) {
  if (views.length === 0) return null;
  return (
    <section className="card" aria-labelledby="subscriptions-title" data-testid="usage-subscriptions">
      <h2 id="subscriptions-title">Subscriptions</h2>
      <p className="muted">
        Requests served by a subscription (a client&apos;s own Claude or ChatGPT login passed through) are counted in tokens and
        covered by the plan: no spend, outside every budget. When a window runs out, its requests fall back to the combo&apos;s next
        targets until the reset.
      </p>
      {views.map((v) => (
        <HeadroomBars key={`${v.provider}/${v.credential}`} view={v} now={now} label={`${v.provider}: ${headroomLabel(v)}`} />
      ))}
    </section>
  );
}

export function UsagePage() {
  const api = useApi();
  const live = useLiveVersion();
  const completed = useRequestsVersion();
  // Only the UTC day matters: a page left open past midnight moves "today" along.
  const now = useNow(60_000);
  const health = useResource(() => api.health(), [api, live]);
  const [choice, setChoice] = useState<RangeChoice>({ kind: '7d', from: '', to: '' });
  const [stackBy, setStackBy] = useState<StackBy>('model');
  const [saved, setSaved] = useState<{ name: string; text: string } | null>(null);

  const resolved = resolveRange(choice, now);
  const range = isRangeError(resolved) ? null : resolved;
  const query = range ? queryOf(range, stackBy) : null;
  const queryKey = JSON.stringify(query);

  const views = useResource(async (): Promise<Views | null> => {
    if (!range || !query) return null;
    const base = { from: range.from, to: range.to, bucket: range.bucket };
    const hourly = range.bucket === 'day' ? hourlyRange(range) : null;
    const [stacked, byProvider, byKey, bySession, perHour] = await Promise.all([
      api.usage(query),
      stackBy === 'provider' ? null : api.usage({ ...base, group_by: 'provider' }),
      api.usage({ ...base, group_by: 'key' }),
      api.usage({ ...base, group_by: 'session' }),
      hourly ? api.usage({ from: hourly.from, to: hourly.to, bucket: 'hour' }) : null,
    ]);
    return { stacked, byProvider: byProvider ?? stacked, byKey, bySession, activity: perHour ?? stacked };
  }, [api, queryKey, live, completed]);
  const budgets = useResource(() => api.budgets(), [api, live, completed]);
  const tracking = useResource(() => api.section('usage'), [api, live]);

  const data = views.data ?? null;
  const charts = useMemo(
    () =>
      data && {
        spend: stackedChart(data.stacked, 'spend'),
        tokens: stackedChart(data.stacked, 'tokens'),
        activity: activityChart(data.activity),
        latencies: latencies(data.byProvider),
        keys: topKeys(data.byKey),
        sessions: topKeys(data.bySession),
      },
    [data],
  );

  const csv = useAction(async () => {
    if (!range || !query) return;
    const text = await api.usageCsv(query);
    const name = `switchyard-usage-${range.from}-to-${range.to}-by-${stackBy}.csv`;
    download(name, 'text/csv', text);
    setSaved({ name, text });
  });

  // A custom range the page cannot ask for, or one the server refused, at its field.
  const placed = placeError(views.error, ['from', 'to']);
  const fieldError = (field: 'from' | 'to') =>
    (isRangeError(resolved) && resolved.field === field ? resolved.message : null) ?? placed.fields[field] ?? null;
  const pick = (kind: RangeChoice['kind']) => {
    // A custom range starts from the one shown.
    if (kind === 'custom' && range) setChoice({ kind, from: range.from, to: range.to });
    else setChoice({ ...choice, kind });
  };

  const total = data?.stacked.total;
  const bucketName = range?.bucket ?? 'day';
  const activityBucket = data?.activity.bucket ?? 'hour';

  return (
    <div className="page">
      <header className="page-head">
        <h1>Usage</h1>
        <BusyButton className="secondary" busy={csv.busy} busyLabel="Preparing…" disabled={!query} onClick={() => void csv.run()}>
          Download CSV
        </BusyButton>
      </header>
      <BudgetAlerts budgets={budgets.data} />
      {tracking.data && !tracking.data.tracking ? (
        <div className="note note-warn" role="status">
          Usage tracking is off: new requests are not counted here and budgets are not checked. Turn it on in{' '}
          <a href="#/settings/budgets">Settings → Budgets</a>.
        </div>
      ) : null}

      <form className="card usage-controls" role="search" aria-label="Usage range" onSubmit={(e) => e.preventDefault()}>
        <fieldset className="radios inline segmented">
          <legend>Range</legend>
          {RANGES.map((r) => (
            <label key={r.kind}>
              <input type="radio" name="usage-range" value={r.kind} checked={choice.kind === r.kind} onChange={() => pick(r.kind)} /> {r.label}
            </label>
          ))}
        </fieldset>
        {choice.kind === 'custom' ? (
          <div className="row align-end">
            <TextField label="From (UTC day)" type="date" value={choice.from} onChange={(e) => setChoice({ ...choice, from: e.target.value })} error={fieldError('from')} />
            <TextField label="To (UTC day, included)" type="date" value={choice.to} onChange={(e) => setChoice({ ...choice, to: e.target.value })} error={fieldError('to')} />
          </div>
        ) : null}
        <fieldset className="radios inline segmented">
          <legend>Stack by</legend>
          {(['model', 'provider'] as const).map((by) => (
            <label key={by}>
              <input type="radio" name="usage-stack" value={by} checked={stackBy === by} onChange={() => setStackBy(by)} /> {by === 'model' ? 'Model' : 'Provider'}
            </label>
          ))}
        </fieldset>
        {range ? (
          <p className="muted range-caption" data-testid="usage-range">
            {range.from === range.to ? range.from : `${range.from} to ${range.to}`} (UTC), by the {range.bucket}
          </p>
        ) : null}
      </form>
      {/* A refusal of a custom day shows at its field; anything else here. */}
      <ErrorNote error={placed.form === null && choice.kind === 'custom' ? null : views.error} title="Cannot read usage" />
      <ErrorNote error={csv.error} title="No CSV" />
      {saved ? (
        <div className="note" role="status">
          <p>
            Saved as <code>{saved.name}</code> in your downloads. The same text, to copy:
          </p>
          <div className="row">
            <CopyButton text={saved.text} label="Copy CSV" />
            <button type="button" className="secondary small" onClick={() => setSaved(null)}>
              Done
            </button>
          </div>
        </div>
      ) : null}

      {total ? (
        <section className="card" aria-labelledby="usage-totals-title">
          <h2 id="usage-totals-title">Totals</h2>
          <Figures
            items={[
              { label: 'Spend', value: formatUsdExact(total.cost), testId: 'total-spend' },
              { label: 'Requests', value: count(total.requests), testId: 'total-requests' },
              { label: 'Fallbacks', value: count(total.fallbacks), testId: 'total-fallbacks' },
              { label: 'Errors', value: count(total.errors), testId: 'total-errors' },
              { label: 'Tokens', value: abbreviate(totalTokens(total)), testId: 'total-tokens', title: `${count(totalTokens(total))} tokens` },
            ]}
          />
          <dl className="facts token-buckets" aria-label="Tokens by bucket">
            <dt>Uncached input</dt>
            <dd data-testid="tokens-uncached_input">{count(total.uncached_input)}</dd>
            <dt>Cache read</dt>
            <dd data-testid="tokens-cache_read">{count(total.cache_read)}</dd>
            <dt>Cache write</dt>
            <dd data-testid="tokens-cache_write">{count(total.cache_write)}</dd>
            <dt>Output</dt>
            <dd data-testid="tokens-output">{count(total.output)}</dd>
            <dt>of which reasoning</dt>
            <dd data-testid="tokens-reasoning">{count(total.reasoning)}</dd>
          </dl>
          {total.cost_unknown > 0 ? (
            <p className="muted">
              {count(total.cost_unknown)} {total.cost_unknown === 1 ? 'request' : 'requests'} used tokens at a price not known: counted in
              tokens, not in spend. Give their models a price (<code>[[providers.models]]</code> <code>price</code>, or a catalogue preset).
            </p>
          ) : null}
          {total.estimated > 0 ? (
            <p className="muted">
              {count(total.estimated)} {total.estimated === 1 ? 'request’s counts are an estimate' : 'requests’ counts are estimates'}: a
              stream cut before its final count, so a lower bound.
            </p>
          ) : null}
        </section>
      ) : null}

      <Subscriptions views={(health.data?.headroom ?? []).filter((v) => v.subscription)} now={now} />

      {total && total.requests === 0 ? (
        <section className="card empty-state" aria-labelledby="usage-empty-title">
          <h2 id="usage-empty-title">No requests in this range</h2>
          <p>
            Point a tool at this endpoint (<a href="#/connect">Connect your tools</a>) or send a prompt from{' '}
            <a href="#/combos">Combos → Try it</a>: spend, tokens and latency appear here as requests complete, without reloading.
          </p>
        </section>
      ) : null}

      {charts && total && total.requests > 0 ? (
        <>
          <div className="cards two">
            <section className="card" aria-labelledby="spend-title">
              <h2 id="spend-title">Spend per {bucketName}</h2>
              {isEmptyChart(charts.spend) ? (
                <p className="muted">
                  Nothing served in this range has a known price, so there is no spend to show. Give the models a price
                  (<code>[[providers.models]]</code> <code>price</code>, or a catalogue preset).
                </p>
              ) : (
                <UsageChart label={`Spend per ${bucketName} by ${stackBy}`} data={charts.spend} bucket={bucketName} format={formatDollars} ticks={dollarTicks} stacked />
              )}
            </section>
            <section className="card" aria-labelledby="tokens-title">
              <h2 id="tokens-title">Tokens per {bucketName}</h2>
              {isEmptyChart(charts.tokens) ? (
                <p className="muted">No upstream reported token counts in this range.</p>
              ) : (
                <UsageChart label={`Tokens per ${bucketName} by ${stackBy}`} data={charts.tokens} bucket={bucketName} format={abbreviate} counts stacked />
              )}
            </section>
          </div>
          <section className="card" aria-labelledby="activity-title">
            <h2 id="activity-title">Requests and fallbacks per {activityBucket}</h2>
            {activityBucket === 'day' ? (
              <p className="muted">Hours are reported for ranges of up to 31 days: this one is shown by the day.</p>
            ) : null}
            <UsageChart label={`Requests and fallbacks per ${activityBucket}`} data={charts.activity} bucket={activityBucket} format={abbreviate} counts height={180} />
          </section>
          <div className="cards two">
            <section className="card" aria-labelledby="ttft-title">
              <h2 id="ttft-title">Time to first token</h2>
              {charts.latencies.length === 0 ? (
                <p className="muted">No streamed request was served in this range: time to first token is measured on streamed answers.</p>
              ) : (
                <LatencyTable rows={charts.latencies} />
              )}
            </section>
            <section className="card" aria-labelledby="keys-spend-title">
              <h2 id="keys-spend-title">Top keys by spend</h2>
              <KeyTable label="Top keys by spend" column="Key" rows={charts.keys} />
              {charts.keys.every((k) => k.key === null) ? (
                <p className="muted">
                  No request came through a local API key: give each tool its own (<a href="#/settings/general">Settings → General</a>) to see what each one
                  spends.
                </p>
              ) : null}
            </section>
          </div>
          <section className="card" aria-labelledby="sessions-spend-title">
            <h2 id="sessions-spend-title">Top agent sessions by spend</h2>
            {charts.sessions.every((k) => k.key === null) ? (
              <p className="muted">
                No request in this range belonged to an agent session: sessions are on by default (<code>[settings.routing] sessions</code>), and each
                counts from its first turn.
              </p>
            ) : (
              <KeyTable label="Top agent sessions by spend" column="Session" rows={charts.sessions} />
            )}
          </section>
        </>
      ) : null}

      <section className="card" aria-labelledby="budgets-title">
        <div className="section-head">
          <h2 id="budgets-title">Budgets</h2>
          <a href="#/settings/budgets">Edit budgets</a>
        </div>
        <ErrorNote error={budgets.error} />
        {budgets.data && budgets.data.length === 0 ? (
          <p className="muted">
            No budget set. Set a daily or monthly spend limit, over every request or per key, in <a href="#/settings/budgets">Settings → Budgets</a>: a
            warning shows here at 80 %, and an enforced budget refuses requests once spent.
          </p>
        ) : null}
        {budgets.data && budgets.data.length > 0 ? <BudgetMeters budgets={budgets.data} /> : null}
      </section>
    </div>
  );
}

/** A table whose last column is a bar: a figure per row at a glance. */
function BarTable({ label, columns, rows }: { label: string; columns: string[]; rows: Array<{ key: string; cells: ReactNode[]; bar: ReactNode }> }) {
  return (
    <table className="table" aria-label={label}>
      <thead>
        <tr>
          {columns.map((column) => (
            <th scope="col" key={column}>
              {column}
            </th>
          ))}
          <th scope="col">
            <span className="sr-only">Bar</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={row.key}>
            {row.cells.map((cell, i) => (
              <td key={i} className={i === 0 ? undefined : 'num'}>
                {cell}
              </td>
            ))}
            <td className="bar-cell" aria-hidden="true">
              {row.bar}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function LatencyTable({ rows }: { rows: Latency[] }) {
  const slowest = Math.max(...rows.map((r) => r.p95));
  return (
    <BarTable
      label="Time to first token by provider"
      columns={['Provider', 'p50', 'p95', 'Streamed']}
      rows={rows.map((r) => ({
        key: r.label,
        cells: [r.label, formatLatency(r.p50), formatLatency(r.p95), count(r.samples)],
        bar: (
          <span className="bar bar-p95" style={{ width: `${(r.p95 / slowest) * 100}%` }}>
            <span className="bar bar-p50" style={{ width: `${(r.p50 / r.p95) * 100}%` }} />
          </span>
        ),
      }))}
    />
  );
}

/** What each group (a local key, an agent session) spent, the largest first. */
function KeyTable({ label, column, rows }: { label: string; column: string; rows: KeySpend[] }) {
  const name = (r: KeySpend) => (r.key === null ? <span className="muted">{r.label}</span> : r.label);
  return (
    <BarTable
      label={label}
      columns={[column, 'Spend', 'Requests']}
      rows={rows.map((r) => ({
        key: r.key ?? r.label,
        cells: [name(r), formatUsdExact(r.cost), count(r.requests)],
        bar: <span className="bar bar-spend" style={{ width: `${r.share * 100}%` }} />,
      }))}
    />
  );
}
