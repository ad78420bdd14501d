import type { HeadroomView } from '../bindings/HeadroomView';
import { Badge } from './controls';
import { formatCountdown } from '../format/duration';

/** What each quota window is called where a user reads it. */
const windowName: Record<string, string> = {
  requests: 'Requests',
  tokens: 'Tokens',
  'input-tokens': 'Input tokens',
  'output-tokens': 'Output tokens',
  '5h': '5-hour window',
  '7d': 'Weekly window',
  primary: 'Primary window',
  secondary: 'Secondary window',
};

/**
 * What a credential's windows are shown as: its id, or for a subscription (a `client`
 * credential, kept per account: `login~3f2a…`) its id and the account's digest.
 */
export function headroomLabel(view: HeadroomView): string {
  const at = view.credential.indexOf('~');
  return at < 0 ? view.credential : `${view.credential.slice(0, at)} · account ${view.credential.slice(at + 1)}`;
}

/**
 * One credential's quota windows (RESILIENCE.md §11): a bar per window with what is left and
 * when it refills, and a note when the credential is under its reserve (it then takes no new
 * session while another credential has more). `now` is the page's clock.
 */
export function HeadroomBars({ view, now, label }: { view: HeadroomView; now: number; label?: string }) {
  const name = label ?? `${view.provider}/${view.credential}`;
  // The smallest window governs: the one that put the credential under its reserve.
  const lowest = Math.min(...view.windows.map((w) => w.remaining));
  return (
    <div className="headroom" aria-label={`Quota of ${name}`} data-testid={`headroom-${view.provider}-${view.credential}`}>
      {view.below_reserve ? (
        <p className="headroom-note">
          <Badge tone="warn">under its reserve</Badge> <span className="muted">takes no new session while another credential has more</span>
        </p>
      ) : null}
      <ul className="plain">
        {view.windows.map((w) => {
          const percent = Math.round(w.remaining * 100);
          const governs = view.below_reserve && w.remaining === lowest;
          return (
            <li key={w.name} className="headroom-window">
              <span>{windowName[w.name] ?? w.name}</span>
              <span
                className={`meter${governs ? ' meter-warn' : ''}`}
                role="meter"
                aria-label={`${windowName[w.name] ?? w.name} left on ${name}`}
                aria-valuemin={0}
                aria-valuemax={100}
                aria-valuenow={percent}
              >
                <span style={{ width: `${percent}%` }} />
              </span>
              <span className="num">
                {percent} % left{w.resets_at !== null ? `, resets in ${formatCountdown(w.resets_at - now)}` : ''}
              </span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
