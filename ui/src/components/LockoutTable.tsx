import { useEffect, useState } from 'react';
import type { CandidateKey } from '../bindings/CandidateKey';
import type { LockReason } from '../bindings/LockReason';
import { useAction, useApi, useLiveVersion, useNow, useResource } from '../app/context';
import { formatCountdown, remainingAt } from '../format/duration';
import { BusyButton, ErrorNote } from './controls';

const keyText = (key: CandidateKey) => `${key.provider}/${key.credential}/${key.model}`;

export function reasonText(reason: LockReason | null): string {
  if (!reason) return 'unknown';
  const kind = reason.kind.replace(/_/g, ' ');
  return reason.status === null ? kind : `${kind} (${reason.status})`;
}

/**
 * The active model lockouts, live: re-read on every health event, counting down each second
 * from what the server said was left, and re-read when one runs out.
 */
export function LockoutTable() {
  const api = useApi();
  const live = useLiveVersion();
  const lockouts = useResource(() => api.lockouts(), [api, live]);
  const now = useNow(1000);
  const [clearing, setClearing] = useState<string | null>(null);

  const clearOne = useAction(async (key: CandidateKey) => {
    setClearing(keyText(key));
    try {
      await api.clearLockout(key);
      await lockouts.reload();
    } finally {
      setClearing(null);
    }
  });
  const clearAll = useAction(async () => {
    await api.clearAllLockouts();
    await lockouts.reload();
  });

  const rows = (lockouts.data ?? []).map((lockout) => ({
    lockout,
    left: remainingAt(lockout.remaining_ms, lockouts.readAt, now),
  }));
  const active = rows.filter((row) => row.left > 0);
  const expired = rows.length - active.length;
  const { reload } = lockouts;
  useEffect(() => {
    if (expired > 0) void reload();
  }, [expired, reload]);

  return (
    <section aria-labelledby="active-lockouts">
      <div className="section-head">
        <h2 id="active-lockouts">Active lockouts</h2>
        <BusyButton
          className="danger"
          busy={clearAll.busy}
          busyLabel="Clearing…"
          disabled={active.length === 0}
          onClick={() => void clearAll.run()}
        >
          Clear all
        </BusyButton>
      </div>
      <ErrorNote error={lockouts.error} title="Cannot read lockouts" />
      <ErrorNote error={clearOne.error ?? clearAll.error} title="Cannot clear" />
      {lockouts.data === undefined && lockouts.loading ? (
        <p className="muted">Loading…</p>
      ) : active.length === 0 ? (
        <p className="muted" data-testid="no-lockouts">
          No model is locked out.
        </p>
      ) : (
        <div className="table-wrap">
          <table className="table" aria-label="Active lockouts">
            <thead>
              <tr>
                <th scope="col">Provider</th>
                <th scope="col">Credential</th>
                <th scope="col">Model</th>
                <th scope="col">Reason</th>
                <th scope="col">Remaining</th>
                <th scope="col">Consecutive failures</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {active.map(({ lockout, left }) => {
                const id = keyText(lockout.key);
                return (
                  <tr key={id} data-testid="lockout-row">
                    <td>{lockout.key.provider}</td>
                    <td>{lockout.key.credential}</td>
                    <td>{lockout.key.model}</td>
                    <td>{reasonText(lockout.reason)}</td>
                    <td className="num" data-testid="remaining">
                      {formatCountdown(left)}
                    </td>
                    <td className="num">{lockout.consecutive_failures}</td>
                    <td>
                      <BusyButton
                        className="secondary small"
                        busy={clearing === id}
                        busyLabel="Clearing…"
                        aria-label={`Clear lockout of ${id}`}
                        onClick={() => void clearOne.run(lockout.key)}
                      >
                        Clear
                      </BusyButton>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
