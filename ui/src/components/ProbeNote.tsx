import type { Bench } from '../bindings/Bench';
import type { ProbeScope } from '../bindings/ProbeScope';
import type { ProbeView } from '../bindings/ProbeView';
import { formatAgo } from '../format/duration';
import { Badge } from './controls';

/** Why a target was probed, for people. */
const benchText: Record<Bench, string> = {
  breaker_half_open: 'breaker half-open',
  breaker_degraded: 'breaker degraded',
  credential_cooled: 'key cooled down',
  model_lock_lapsed: 'lock ran out',
  breaker_open: 'breaker re-opened',
  credential_cooling: 'key cooling again',
  model_locked: 'locked again',
};

/** What one probe answers for: a provider, one key, or one model on one key. */
export function probeScopeLabel(scope: ProbeScope): string {
  switch (scope.layer) {
    case 'provider':
      return scope.provider;
    case 'credential':
      return `${scope.key.provider}/${scope.key.credential}`;
    case 'model':
      return `${scope.key.provider}/${scope.key.model} on ${scope.key.credential}`;
  }
}

/**
 * A benched target's recovery: "probing" while the proxy's one-token probe is out, else what
 * the last probe found ("back" once it healed the target, or the status that kept it benched).
 */
export function ProbeNote({ view, now }: { view: ProbeView; now: number }) {
  const last = view.last;
  return (
    <span className="probe-note">
      {view.probing ? <Badge tone="warn">probing</Badge> : null}
      {last ? (
        <>
          {' '}
          <Badge tone={last.healed ? 'ok' : 'bad'}>{last.healed ? 'back' : 'still failing'}</Badge>{' '}
          <span className="muted">
            last probe {formatAgo(last.at, now)}: {last.status ?? last.outcome.replace(/_/g, ' ')} ({benchText[last.bench]})
          </span>
        </>
      ) : null}
    </span>
  );
}
