import type { TraceEntry } from '../bindings/TraceEntry';
import { Badge } from './controls';

/** One request's routing trace: every candidate skipped or tried, in order. */
export function TraceView({ trace, label, servedBy }: { trace: TraceEntry[]; label: string; servedBy?: string | null }) {
  const served = servedBy ? (
    <p className="trace-served">
      <Badge tone="ok">served</Badge> by <code>{servedBy}</code>
    </p>
  ) : servedBy === null ? (
    <p className="trace-served">
      <Badge tone="bad">not served</Badge>
    </p>
  ) : null;
  if (trace.length === 0) return <>{served ?? <p className="muted">No candidate was considered.</p>}</>;
  return (
    <>
    <table className="table trace" aria-label={label}>
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">Target</th>
          <th scope="col">Credential</th>
          <th scope="col">What happened</th>
          <th scope="col">Status</th>
          <th scope="col">Time</th>
        </tr>
      </thead>
      <tbody>
        {trace.map((entry, i) => (
          <tr key={i}>
            <td className="num">{i + 1}</td>
            <td>{entry.target}</td>
            <td>{entry.credential}</td>
            {entry.event === 'skipped' ? (
              <>
                <td>
                  <Badge tone="muted">skipped</Badge> {entry.reason.replace(/_/g, ' ')}
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'continued' ? (
              <>
                <td>
                  <Badge tone="ok">continued</Badge> on {entry.target} after {entry.after_chars} characters
                  <span className="muted"> · {entry.mechanism}</span>
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'not_continued' ? (
              <>
                <td>
                  <Badge tone="bad">not continued</Badge> {entry.reason.replace(/_/g, ' ')}
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'hedge' ? (
              <>
                <td>
                  <Badge tone={entry.hedge === 'won' ? 'ok' : 'muted'}>hedge</Badge>{' '}
                  {entry.hedge === 'started'
                    ? 'started beside the slower attempt'
                    : entry.hedge === 'started_early'
                      ? 'started early, so its answer could begin by the first-event deadline'
                      : entry.hedge === 'won'
                      ? `hedged: ${entry.target} won after ${entry.millis} ms`
                      : 'cancelled: the other answered first; charged nothing'}
                </td>
                <td />
                <td className="num">{entry.millis} ms</td>
              </>
            ) : entry.event === 'used' ? (
              <>
                <td>
                  <Badge tone="muted">used</Badge> {entry.uncached_input + entry.cache_read + entry.cache_write} in
                  {entry.cache_read + entry.cache_write > 0
                    ? ` (${entry.cache_read} cache read, ${entry.cache_write} cache write)`
                    : ''}
                  , {entry.output} out{entry.reasoning > 0 ? ` (${entry.reasoning} reasoning)` : ''}
                  <span className="muted">
                    {entry.cost !== undefined ? ` · $${entry.cost}` : ''}
                    {entry.estimated ? ' · as reported before the answer broke off' : ''}
                  </span>
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'ranked' ? (
              <>
                <td data-testid={`ranked-${entry.rank}`}>
                  <Badge tone={entry.rank === 1 ? 'ok' : 'muted'}>
                    {entry.preset} #{entry.rank}
                  </Badge>{' '}
                  score {entry.score}
                  {entry.margin !== undefined ? <span className="muted"> · ahead of the next by {entry.margin}</span> : null}
                  <span className="muted">
                    {' · '}
                    {entry.factors.map((f) => `${f.name} ${f.value} × ${f.weight}`).join(', ')}
                  </span>
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'queued' ? (
              <>
                <td>
                  <Badge tone="muted">queued</Badge> waited for a free slot (max in flight)
                </td>
                <td />
                <td className="num">{entry.millis} ms</td>
              </>
            ) : entry.event === 'session' ? (
              <>
                <td>
                  <Badge tone={entry.pin === 'moved' ? 'bad' : 'muted'}>session</Badge> {entry.session}:{' '}
                  {sessionLine(entry, `${entry.target}@${entry.credential}`)}
                </td>
                <td />
                <td />
              </>
            ) : entry.event === 'probe' ? (
              <>
                <td>
                  <Badge tone="muted">probe</Badge> {entry.bench.replace(/_/g, ' ')}
                  <span className="muted">
                    {entry.not_sent ? ` · not sent: ${entry.not_sent.replace(/_/g, ' ')}` : ' · sent alongside, one token'}
                  </span>
                </td>
                <td />
                <td />
              </>
            ) : (
              <>
                <td>
                  <Badge tone={entry.outcome === 'success' ? 'ok' : 'bad'}>attempted</Badge> {entry.outcome.replace(/_/g, ' ')}
                  {entry.path ? <span className="muted"> · {entry.path}</span> : null}
                  {entry.dropped && entry.dropped.length > 0 ? (
                    <div className="muted trace-dropped">not carried: {entry.dropped.join(', ')}</div>
                  ) : null}
                </td>
                <td className="num">{entry.status ?? '—'}</td>
                <td className="num">{entry.millis} ms</td>
              </>
            )}
          </tr>
        ))}
      </tbody>
    </table>
    {served}
    </>
  );
}

/** What a trace's `session` line says: where the session went, and why (RESILIENCE.md §11). */
function sessionLine(entry: Extract<TraceEntry, { event: 'session' }>, here: string): string {
  const because: Record<string, string> = {
    broke: 'its stream broke there',
    benched: 'it was benched or failed',
    served_whole_stream: 'it served a whole stream since',
    served: 'it served since',
    higher_in_order: "it is healthy and first in the combo's order",
  };
  const why = entry.because ? ` (${because[entry.because] ?? entry.because.replace(/_/g, ' ')})` : '';
  switch (entry.pin) {
    case 'new':
      return 'pinned here';
    case 'kept':
      return 'kept on its key';
    case 'returned':
      return `back on its target${why}`;
    default:
      if (entry.because === 'broke' && entry.from === here) {
        return 'its stream broke here: its next request starts elsewhere';
      }
      return `moved here${entry.from ? ` from ${entry.from}` : ''}${why}`;
  }
}
