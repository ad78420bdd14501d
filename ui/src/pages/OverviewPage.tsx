import { useMemo, useState } from 'react';
import type { BreakerState } from '../bindings/BreakerState';
import type { DoctorApplied } from '../bindings/DoctorApplied';
import type { DoctorFinding } from '../bindings/DoctorFinding';
import type { ResetScope } from '../bindings/ResetScope';
import type { TeamView } from '../bindings/TeamView';
import { ApiFailure } from '../api/failure';
import { insideDesktop } from '../api/ipc';
import { useAction, useApi, useLiveVersion, useNow, useRequestsVersion, useResource } from '../app/context';
import { BudgetAlerts } from '../components/BudgetNotes';
import { Badge, BusyButton, CopyButton, ErrorNote, Figures } from '../components/controls';
import { UsageChart } from '../components/UsageChart';
import { reasonText } from '../components/LockoutTable';
import { HeadroomBars } from '../components/Headroom';
import { ProbeNote, probeScopeLabel } from '../components/ProbeNote';
import { formatAgo, formatCountdown, remainingAt } from '../format/duration';
import { abbreviate, formatDollars, formatUsdExact, totalTokens } from '../format/usage';
import { dollarTicks, isEmptyChart, stackedChart } from '../usage/chart';
import { isRangeError, resolveRange } from '../usage/range';

const breakerTone: Record<BreakerState, 'ok' | 'warn' | 'bad'> = {
  closed: 'ok',
  degraded: 'warn',
  half_open: 'warn',
  open: 'bad',
};
const breakerText: Record<BreakerState, string> = {
  closed: 'healthy',
  degraded: 'degraded',
  half_open: 'probing',
  open: 'open',
};

/**
 * The shell lines that point Claude Code at this server. Claude Code adds `/v1/messages` to
 * its base URL itself, so the base is the endpoint without `/v1`. The key is a placeholder:
 * a local key is shown once, when created, and never again.
 */
export function claudeCodeLines(endpoint: string, combo: string | null): string {
  const base = endpoint.replace(/\/v1\/?$/, '');
  const model = combo
    ? `export ANTHROPIC_MODEL=${combo}   # or leave it unset and let aliases route Claude Code's own model names`
    : '# ANTHROPIC_MODEL: leave it unset and let aliases route Claude Code\'s own model names, or name a combo';
  return [`export ANTHROPIC_BASE_URL=${base}`, 'export ANTHROPIC_AUTH_TOKEN=<your Switchyard local API key>', model].join('\n');
}

/** `text` as a sentence: capitalised, with a full stop. */
function sentence(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

export function OverviewPage() {
  const api = useApi();
  const live = useLiveVersion();
  const now = useNow(1000);
  const server = useResource(() => api.server(), [api]);
  const routing = useResource(() => api.routing(), [api, live]);
  const keys = useResource(() => api.keys(), [api]);
  const providers = useResource(() => api.providers(), [api]);
  const health = useResource(() => api.health(), [api, live]);
  const fallbacks = useResource(() => api.requests({ fallback: true, limit: 10 }), [api, live]);
  const completed = useRequestsVersion();
  const budgets = useResource(() => api.budgets(), [api, live, completed]);

  const endpoint = server.data?.endpoint ?? (insideDesktop() ? null : `${window.location.origin}/v1`);
  const paused = routing.data?.paused ?? false;

  const pause = useAction(async () => {
    await api.setPaused(!paused);
    await routing.reload();
  });
  const reset = useAction(async (scope: ResetScope) => {
    await api.reset(scope);
    await Promise.all([health.reload(), providers.reload()]);
  });
  const [resetScope, setResetScope] = useState('');
  const resetting = (scope: ResetScope) => reset.busy && JSON.stringify(scope) === resetScope;
  const runReset = (scope: ResetScope) => {
    setResetScope(JSON.stringify(scope));
    void reset.run(scope);
  };

  const h = health.data;
  const left = (ms: number) => formatCountdown(remainingAt(ms, health.readAt, now));
  const activeKeys = (keys.data ?? []).filter((k) => k.revoked_at === null);

  return (
    <div className="page">
      <header className="page-head">
        <h1>Overview</h1>
        <BusyButton className="danger" busy={resetting({ scope: 'all' })} disabled={reset.busy} busyLabel="Resetting…" onClick={() => runReset({ scope: 'all' })}>
          Reset all health state
        </BusyButton>
      </header>
      <ErrorNote error={reset.error} title="Reset failed" />
      <BudgetAlerts budgets={budgets.data} />
      {h && !h.persistence.durable ? (
        <div className="note note-warn" role="status">
          Health state is kept in memory only{h.persistence.reason ? `: ${h.persistence.reason}` : ''}.
        </div>
      ) : null}
      {h?.team && !h.team.connected ? (
        <div className="note note-warn" role="status" data-testid="team-offline">
          The team database cannot be reached{h.team.reason ? ` (${h.team.reason})` : ''}: this instance decides alone and sends its changes when the
          database is back.
        </div>
      ) : null}
      {h && h.config_saved_to.to === 'memory_only' ? (
        <div className="note note-warn" role="status">
          Config edits are not saved to disk: they last until the server stops.
        </div>
      ) : null}
      {h && h.config_saved_to.to === 'read_only' ? (
        <div className="note note-warn" role="status" data-testid="config-read-only">
          <strong>
            {h.config_saved_to.written_by ? `Written by Switchyard ${h.config_saved_to.written_by}; update to edit.` : 'Read-only config.'}
          </strong>{' '}
          {sentence(h.config_saved_to.message)}
          {h.config_saved_to.set_aside.length > 0 ? (
            <details>
              <summary>Not running here ({h.config_saved_to.set_aside.length})</summary>
              <ul>
                {h.config_saved_to.set_aside.map((item) => (
                  <li key={item}>
                    <code>{item}</code>
                  </li>
                ))}
              </ul>
            </details>
          ) : null}
        </div>
      ) : null}

      <DoctorCard />

      <div className="cards two">
        <section className="card" aria-labelledby="endpoint-title">
          <h2 id="endpoint-title">Endpoint</h2>
          {endpoint ? (
            <div className="row">
              <code className="endpoint" data-testid="endpoint">
                {endpoint}
              </code>
              <CopyButton text={endpoint} label="Copy endpoint" />
            </div>
          ) : (
            <ErrorNote error={server.error} />
          )}
          <p className="muted">
            OpenAI and Anthropic clients: set this as the base URL, with a local API key.
            {server.data ? ` Switchyard ${server.data.version}.` : ''}
          </p>
          {endpoint ? (
            <div className="claude-code">
              <h3>Claude Code</h3>
              <pre className="snippet" data-testid="claude-code-env">
                {claudeCodeLines(endpoint, h?.combos[0]?.name ?? null)}
              </pre>
              <CopyButton text={claudeCodeLines(endpoint, h?.combos[0]?.name ?? null)} label="Copy Claude Code settings" />
              <p className="muted">
                Paste in the shell that starts <code>claude</code>, with one of your local API keys. Without <code>ANTHROPIC_MODEL</code>, Claude Code asks for its own model names: route
                them with <a href="#/combos">aliases</a>.
              </p>
            </div>
          ) : null}
          <div className="row">
            <span>
              Routing:{' '}
              {routing.data ? (
                paused ? <Badge tone="bad">paused</Badge> : <Badge tone="ok">on</Badge>
              ) : (
                <Badge tone="muted">unknown</Badge>
              )}
            </span>
            <BusyButton
              className="secondary"
              busy={pause.busy}
              busyLabel={paused ? 'Resuming…' : 'Pausing…'}
              disabled={!routing.data}
              onClick={() => void pause.run()}
            >
              {paused ? 'Resume routing' : 'Pause routing'}
            </BusyButton>
          </div>
          {paused ? <p className="muted">While paused, /v1 answers 503.</p> : null}
          <ErrorNote error={routing.error ?? pause.error} title="Routing" />
        </section>

        <section className="card" aria-labelledby="keys-title">
          <h2 id="keys-title">Local API keys</h2>
          <ErrorNote error={keys.error} />
          {activeKeys.length === 0 ? (
            <p className="muted">
              No key yet: <a href="#/settings/general">create one</a>.
            </p>
          ) : (
            <ul className="plain">
              {activeKeys.map((k) => (
                <li key={k.id}>
                  <strong>{k.name}</strong> <code>{k.hint}</code>
                </li>
              ))}
            </ul>
          )}
        </section>
      </div>

      <WeekOfUsage />

      <section aria-labelledby="providers-title">
        <h2 id="providers-title">Providers</h2>
        <ErrorNote error={providers.error ?? health.error} />
        {providers.data && providers.data.length === 0 ? (
          <p className="muted">
            No provider yet: <a href="#/providers">add one</a>.
          </p>
        ) : null}
        <div className="cards">
          {(providers.data ?? []).map((p) => {
            const breaker = h?.breakers.find((b) => b.provider === p.id);
            const state = breaker?.state ?? 'closed';
            const probe = h?.probes.find((v) => v.scope.layer === 'provider' && v.scope.provider === p.id);
            return (
              <article className="card health-card" key={p.id} aria-label={`Provider ${p.id}`} data-testid="health-card">
                <div className="row spread">
                  <h3>{p.id}</h3>
                  <Badge tone={breakerTone[state]}>{breakerText[state]}</Badge>
                </div>
                <dl className="facts">
                  <dt>Failures</dt>
                  <dd>{breaker?.failures ?? 0}</dd>
                  {breaker && breaker.retry_in_ms > 0 ? (
                    <>
                      <dt>Retry in</dt>
                      <dd>{left(breaker.retry_in_ms)}</dd>
                    </>
                  ) : null}
                  {breaker?.last_fault ? (
                    <>
                      <dt>Last fault</dt>
                      <dd>{breaker.last_fault}</dd>
                    </>
                  ) : null}
                  {breaker?.probing_elsewhere ? (
                    <>
                      <dt>Probe</dt>
                      <dd>on another instance of the team</dd>
                    </>
                  ) : null}
                  {breaker?.recorded_by ? (
                    <>
                      <dt>Recorded by</dt>
                      <dd>{breaker.recorded_by}</dd>
                    </>
                  ) : null}
                  <dt>Credentials</dt>
                  <dd>{p.credentials.filter((c) => c.enabled).length} enabled</dd>
                  {probe ? (
                    <>
                      <dt>Recovery</dt>
                      <dd>
                        <ProbeNote view={probe} now={now} />
                      </dd>
                    </>
                  ) : null}
                </dl>
                {(h?.headroom ?? [])
                  .filter((v) => v.provider === p.id)
                  .map((v) => (
                    <HeadroomBars key={v.credential} view={v} now={now} label={v.credential} />
                  ))}
                <BusyButton
                  className="secondary small"
                  busy={resetting({ scope: 'provider', provider: p.id })}
                  busyLabel="Resetting…"
                  aria-label={`Reset provider ${p.id}`}
                  onClick={() => runReset({ scope: 'provider', provider: p.id })}
                >
                  Reset
                </BusyButton>
              </article>
            );
          })}
        </div>
      </section>

      <div className="cards two">
        <section className="card" aria-labelledby="cooling-title">
          <h2 id="cooling-title">Cooling credentials</h2>
          {h && h.credentials.length === 0 ? <p className="muted">Every credential is available.</p> : null}
          <ul className="plain">
            {(h?.credentials ?? []).map((c) => (
              <li key={`${c.key.provider}/${c.key.credential}`} className="row spread">
                <span>
                  <strong>
                    {c.key.provider}/{c.key.credential}
                  </strong>{' '}
                  <Badge tone={c.status === 'cooling' ? 'warn' : 'bad'}>{c.status.replace(/_/g, ' ')}</Badge>{' '}
                  {c.retry_in_ms !== null ? <span className="muted">back in {left(c.retry_in_ms)}</span> : <span className="muted">needs attention</span>}
                  {c.status === 'cooling' && c.last_error === 'auth' && c.recorded_by !== null && c.recorded_by !== h?.team?.instance ? (
                    <span className="muted" data-testid="reported-refused">
                      {' '}
                      · <strong>{c.recorded_by}</strong> reported this key refused; benched here for a bounded time only
                    </span>
                  ) : (
                    <RecordedBy by={c.recorded_by} team={h?.team ?? null} />
                  )}
                </span>
                <button
                  type="button"
                  className="secondary small"
                  aria-label={`Reset credential ${c.key.provider}/${c.key.credential}`}
                  disabled={reset.busy}
                  onClick={() => runReset({ scope: 'credential', provider: c.key.provider, credential: c.key.credential })}
                >
                  Reset
                </button>
              </li>
            ))}
          </ul>
        </section>

        <section className="card" aria-labelledby="overview-lockouts-title">
          <h2 id="overview-lockouts-title">Active lockouts</h2>
          {h && h.lockouts.length === 0 ? <p className="muted">No model is locked out.</p> : null}
          <ul className="plain">
            {(h?.lockouts ?? []).map((l) => (
              <li key={`${l.key.provider}/${l.key.credential}/${l.key.model}`} className="row spread">
                <span>
                  <strong>
                    {l.key.provider}/{l.key.model}
                  </strong>{' '}
                  <span className="muted">
                    on {l.key.credential}, {reasonText(l.reason)}, {left(l.remaining_ms)} left
                  </span>
                  <RecordedBy by={l.recorded_by} team={h?.team ?? null} />
                </span>
                <button
                  type="button"
                  className="secondary small"
                  aria-label={`Reset lockout ${l.key.provider}/${l.key.credential}/${l.key.model}`}
                  disabled={reset.busy}
                  onClick={() => runReset({ scope: 'lockout', key: l.key })}
                >
                  Reset
                </button>
              </li>
            ))}
          </ul>
          <a href="#/settings/lockouts">Manage lockouts</a>
        </section>
      </div>

      {h?.team ? <TeamCard team={h.team} now={now} /> : null}

      {h && h.probes.length > 0 ? (
        <section className="card" aria-labelledby="probes-title">
          <h2 id="probes-title">Recovery probes</h2>
          <p className="muted">
            A benched target whose wait ran out gets a one-token probe while requests go to the next target; a probe that finds it
            healthy gives it its traffic back.
          </p>
          <ul className="plain">
            {h.probes.map((v) => (
              <li key={JSON.stringify(v.scope)} className="row spread">
                <span>
                  <strong>{probeScopeLabel(v.scope)}</strong> <ProbeNote view={v} now={now} />
                </span>
              </li>
            ))}
          </ul>
        </section>
      ) : null}

      {h && h.combos.length > 0 ? (
        <section className="card" aria-labelledby="combos-title">
          <h2 id="combos-title">Combos</h2>
          <ul className="plain">
            {h.combos.map((c) => (
              <li key={c.name} className="row">
                <strong>{c.name}</strong>
                <Badge tone={c.eligible === 0 ? 'bad' : c.eligible < c.candidates ? 'warn' : 'ok'}>
                  {c.eligible} of {c.candidates} ready
                </Badge>
              </li>
            ))}
          </ul>
        </section>
      ) : null}

      <section className="card" aria-labelledby="fallbacks-title">
        <h2 id="fallbacks-title">Recent fallbacks</h2>
        <ErrorNote error={fallbacks.error} />
        {fallbacks.data && fallbacks.data.length === 0 ? <p className="muted">No request needed a fallback.</p> : null}
        {fallbacks.data && fallbacks.data.length > 0 ? (
          <table className="table" aria-label="Recent fallbacks">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Model</th>
                <th scope="col">Served by</th>
                <th scope="col">Attempts</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {fallbacks.data.map((r, i) => (
                <tr key={`${r.at}-${i}`}>
                  <td>{formatAgo(r.at, now)}</td>
                  <td>{r.model}</td>
                  <td>{r.served_by ?? '—'}</td>
                  <td className="num">{r.attempts}</td>
                  <td className="num">{r.status}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
        <a href="#/requests">All requests</a>
      </section>
    </div>
  );
}

/**
 * The doctor (issue 30): what is wrong, what was seen, and the one-step fix or where a person
 * makes it. Apply sends the digest of the evidence on screen, so a state that changed since it
 * was shown is refused by the server (409, nothing changed) and the list is read again instead.
 */
function DoctorCard() {
  const api = useApi();
  const live = useLiveVersion();
  const completed = useRequestsVersion();
  const findings = useResource(() => api.doctor(), [api, live, completed]);
  const [applied, setApplied] = useState<DoctorApplied | null>(null);
  const [stale, setStale] = useState<string | null>(null);
  const [applying, setApplying] = useState('');
  const apply = useAction(async (finding: DoctorFinding) => {
    setApplied(null);
    setStale(null);
    setApplying(finding.id);
    try {
      setApplied(await api.applyFinding(finding.id, { digest: finding.digest }));
    } catch (error) {
      // The two answers that mean "not what you saw": say so and show what there is now.
      if (error instanceof ApiFailure && error.status === 409) {
        setStale(`“${finding.title}” changed since it was shown: nothing was applied. Here is what the doctor sees now.`);
      } else if (error instanceof ApiFailure && error.status === 404) {
        setStale(`“${finding.title}” is gone already: nothing was applied.`);
      } else {
        throw error;
      }
    } finally {
      await findings.reload();
    }
  });
  const list = findings.data ?? [];
  return (
    <section className="card" aria-labelledby="doctor-title" data-testid="doctor">
      <div className="section-head">
        <h2 id="doctor-title">Doctor</h2>
        {findings.data ? (
          <Badge tone={list.length === 0 ? 'ok' : 'warn'}>
            {list.length === 0 ? 'nothing found' : `${list.length} ${list.length === 1 ? 'finding' : 'findings'}`}
          </Badge>
        ) : null}
      </div>
      <ErrorNote error={findings.error} />
      {applied ? (
        <div className="note note-ok" role="status" data-testid="doctor-applied">
          Applied: {applied.says}.
        </div>
      ) : null}
      {stale ? (
        <div className="note note-warn" role="status" data-testid="doctor-stale">
          {stale}
        </div>
      ) : null}
      <ErrorNote error={apply.error} title="Apply failed" />
      {findings.data && list.length === 0 ? <p className="muted">Nothing looks wrong now.</p> : null}
      <ul className="plain">
        {list.map((f) => (
          <li key={f.id} aria-label={f.title} data-testid="doctor-finding">
            <strong>{f.title}</strong>
            <ul>
              {f.evidence.map((line, i) => (
                <li key={i} className="muted">
                  {line}
                </li>
              ))}
            </ul>
            <div className="row">
              <span className="muted">{f.action.kind === 'apply' ? 'Fix:' : 'Advice:'}</span>
              <span>{f.action.says}</span>
              {f.action.kind === 'apply' ? (
                <BusyButton
                  className="secondary small"
                  busy={apply.busy && applying === f.id}
                  disabled={apply.busy}
                  busyLabel="Applying…"
                  aria-label={`Apply: ${f.action.says}`}
                  onClick={() => void apply.run(f)}
                >
                  Apply
                </BusyButton>
              ) : (
                <a href={f.action.link}>Fix it there</a>
              )}
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Spend and tokens per day over the last 7 UTC days, by provider, and their totals. */
function WeekOfUsage() {
  const api = useApi();
  const live = useLiveVersion();
  const completed = useRequestsVersion();
  const now = useNow(60_000);
  const week = resolveRange({ kind: '7d', from: '', to: '' }, now);
  const from = isRangeError(week) ? '' : week.from;
  const to = isRangeError(week) ? '' : week.to;
  const report = useResource(() => api.usage({ from, to, bucket: 'day', group_by: 'provider' }), [api, from, to, live, completed]);
  const charts = useMemo(
    () => report.data && { spend: stackedChart(report.data, 'spend'), tokens: stackedChart(report.data, 'tokens') },
    [report.data],
  );
  const total = report.data?.total;
  return (
    <section className="card" aria-labelledby="week-usage-title">
      <div className="section-head">
        <h2 id="week-usage-title">Usage, last 7 days</h2>
        <a href="#/usage">All usage</a>
      </div>
      <ErrorNote error={report.error} />
      {total && total.requests === 0 ? (
        <p className="muted">No requests in the last 7 days: point a tool at the endpoint above and its spend and tokens show here.</p>
      ) : null}
      {total && charts && total.requests > 0 ? (
        <>
          <Figures
            items={[
              { label: 'Spend', value: formatUsdExact(total.cost), testId: 'week-spend' },
              { label: 'Tokens', value: abbreviate(totalTokens(total)), testId: 'week-tokens' },
              { label: 'Requests', value: total.requests.toLocaleString('en-US'), testId: 'week-requests' },
            ]}
          />
          <div className="cards two">
            {isEmptyChart(charts.spend) ? (
              <p className="muted">Nothing served had a known price: no spend to chart.</p>
            ) : (
              <UsageChart label="Spend per day, last 7 days" data={charts.spend} bucket="day" format={formatDollars} ticks={dollarTicks} stacked height={140} />
            )}
            {isEmptyChart(charts.tokens) ? null : (
              <UsageChart label="Tokens per day, last 7 days" data={charts.tokens} bucket="day" format={abbreviate} counts stacked height={140} />
            )}
          </div>
        </>
      ) : null}
    </section>
  );
}

/** Which instance of the team recorded a cooldown or a lock; nothing without a team. */
function RecordedBy({ by, team }: { by: string | null; team: TeamView | null }) {
  if (team === null) return null;
  const here = by === null || by === team.instance;
  return <span className="muted"> · recorded by {here ? 'this instance' : <strong>{by}</strong>}</span>;
}

/** Team mode (issue 20): whether state is shared, and the instances seen in the last minute. */
function TeamCard({ team, now }: { team: TeamView; now: number }) {
  const offset = team.clock_offset_ms;
  return (
    <section className="card" aria-labelledby="team-title" data-testid="team-card">
      <div className="row spread">
        <h2 id="team-title">Team</h2>
        {team.connected ? <Badge tone="ok">sharing</Badge> : <Badge tone="warn">not sharing</Badge>}
      </div>
      <p className="muted">
        Breaker, cooldown and lockout state is shared with the instances below through the team database. This instance is <strong>{team.instance}</strong>
        {Math.abs(offset) >= 1000 ? `; its clock is ${Math.round(Math.abs(offset) / 1000)} s ${offset > 0 ? 'behind' : 'ahead of'} the database's, and shared deadlines are converted` : ''}.
      </p>
      {team.backlog > 0 || team.dropped > 0 ? (
        <p className="muted">
          {team.backlog} changes waiting for the database{team.dropped > 0 ? `, ${team.dropped} dropped` : ''}.
        </p>
      ) : null}
      <table className="table" aria-label="Team instances">
        <thead>
          <tr>
            <th scope="col">Instance</th>
            <th scope="col">Version</th>
            <th scope="col">Seen</th>
          </tr>
        </thead>
        <tbody>
          {team.members.map((m) => (
            <tr key={m.id}>
              <td>
                {m.id}
                {m.id === team.instance ? <span className="muted"> (this one)</span> : null}
              </td>
              <td>{m.version}</td>
              <td>{formatAgo(now - m.seen_ms_ago, now)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
