import { Fragment, useState } from 'react';
import type { Outcome } from '../bindings/Outcome';
import type { RequestQuery } from '../bindings/RequestQuery';
import { useApi, useLiveVersion, useNow, useResource } from '../app/context';
import { Badge, CheckField, ErrorNote, SelectField, TextField } from '../components/controls';
import { TraceView } from '../components/TraceView';
import { formatAgo } from '../format/duration';
import { describeTokens, formatCost, formatTokens } from '../format/usage';

export function RequestsPage() {
  const api = useApi();
  const live = useLiveVersion();
  const now = useNow(5000);
  const [model, setModel] = useState('');
  const [provider, setProvider] = useState('');
  const [outcome, setOutcome] = useState<'' | Outcome>('');
  const [fallback, setFallback] = useState(false);
  const [limit, setLimit] = useState(100);
  // How many of the newest matches the page skips: older pages come from the state file, so
  // the whole kept history (10,000 requests, across restarts) can be paged through.
  const [offset, setOffset] = useState(0);
  // Keyed by the entry, not its row number: new requests arrive at the top.
  const [open, setOpen] = useState<Set<string>>(new Set());
  const filters: RequestQuery = { limit };
  if (model.trim()) filters.model = model.trim();
  if (provider.trim()) filters.provider = provider.trim();
  if (outcome) filters.outcome = outcome;
  if (fallback) filters.fallback = true;
  const filterKey = JSON.stringify(filters);
  const [pagedFor, setPagedFor] = useState(filterKey);
  if (pagedFor !== filterKey) {
    // Other filters or page size: back to the newest.
    setPagedFor(filterKey);
    setOffset(0);
  }
  const query: RequestQuery = offset > 0 && pagedFor === filterKey ? { ...filters, offset } : filters;
  const key = JSON.stringify(query);
  const requests = useResource(() => api.requests(query), [api, key, live]);
  const shown = requests.data?.length ?? 0;

  const toggle = (id: string) => {
    const next = new Set(open);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setOpen(next);
  };

  return (
    <div className="page">
      <header className="page-head">
        <h1>Requests</h1>
        <button type="button" className="secondary" onClick={() => void requests.reload()} disabled={requests.loading}>
          {requests.loading ? 'Refreshing…' : 'Refresh'}
        </button>
      </header>
      <form className="filters" role="search" aria-label="Filter requests" onSubmit={(e) => e.preventDefault()}>
        <TextField label="Model" value={model} onChange={(e) => setModel(e.target.value)} placeholder="combo or provider/model" />
        <TextField label="Served by provider" value={provider} onChange={(e) => setProvider(e.target.value)} />
        <SelectField label="Outcome" value={outcome} onChange={(e) => setOutcome(e.target.value as '' | Outcome)}>
          <option value="">Any</option>
          <option value="ok">Succeeded</option>
          <option value="error">Failed</option>
        </SelectField>
        <SelectField label="Show" value={String(limit)} onChange={(e) => setLimit(Number(e.target.value))}>
          {[25, 100, 500, 1000].map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </SelectField>
        <CheckField label="Only fallbacks" checked={fallback} onChange={(e) => setFallback(e.target.checked)} />
      </form>
      <ErrorNote error={requests.error} title="Cannot read the request log" />
      {requests.data && requests.data.length === 0 ? (
        <p className="muted">{offset > 0 ? 'No older request matches.' : 'No request matches.'}</p>
      ) : null}
      {requests.data && requests.data.length > 0 ? (
        <div className="table-wrap">
          <table className="table" aria-label="Requests">
            <thead>
              <tr>
                <th scope="col">
                  <span className="sr-only">Trace</span>
                </th>
                <th scope="col">When</th>
                <th scope="col">Model</th>
                <th scope="col">Served by</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Duration</th>
                <th scope="col">Tokens in → out</th>
                <th scope="col">Cost</th>
                <th scope="col">Dialect</th>
              </tr>
            </thead>
            <tbody>
              {requests.data.map((r, i) => {
                const id = `${r.at}|${r.model}|${r.duration_ms}|${r.status}`;
                const expanded = open.has(id);
                return (
                <Fragment key={`${id}|${i}`}>
                  <tr data-testid="request-row">
                    <td>
                      <button
                        type="button"
                        className="secondary small"
                        aria-expanded={expanded}
                        aria-controls={`trace-${i}`}
                        aria-label={`${expanded ? 'Hide' : 'Show'} routing trace of request ${i + 1}`}
                        onClick={() => toggle(id)}
                      >
                        {expanded ? '▾' : '▸'}
                      </button>
                    </td>
                    <td title={new Date(r.at).toLocaleString()}>{formatAgo(r.at, now)}</td>
                    <td>{r.model}</td>
                    <td>{r.served_by ?? '—'}</td>
                    <td>
                      <Badge tone={r.status < 300 && r.outcome !== 'broken' ? 'ok' : 'bad'}>{r.status}</Badge>
                      {r.outcome && r.outcome !== 'complete' ? (
                        <span className="muted"> {r.outcome.replace(/_/g, ' ')}</span>
                      ) : null}
                    </td>
                    <td className="num">{r.attempts > 1 ? <strong>{r.attempts}</strong> : r.attempts}</td>
                    <td className="num">{r.duration_ms} ms</td>
                    <td className="num" title={describeTokens(r.usage)}>{formatTokens(r.usage)}</td>
                    <td className="num">{formatCost(r.cost)}</td>
                    <td>{r.dialect}</td>
                  </tr>
                  {expanded ? (
                    <tr id={`trace-${i}`} className="trace-row">
                      <td colSpan={10}>
                        <TraceView trace={r.trace} servedBy={r.served_by} label={`Routing trace of request ${i + 1}`} />
                      </td>
                    </tr>
                  ) : null}
                </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      {requests.data && (offset > 0 || shown === limit) ? (
        <nav className="row pager" aria-label="Pages of requests">
          <button type="button" className="secondary" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - limit))}>
            Newer
          </button>
          <span className="muted" data-testid="request-range">
            {shown > 0 ? `${offset + 1}–${offset + shown}` : `past ${offset}`}
          </span>
          <button type="button" className="secondary" disabled={shown < limit} onClick={() => setOffset(offset + limit)}>
            Older
          </button>
        </nav>
      ) : null}
    </div>
  );
}
