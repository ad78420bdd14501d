import { act, fireEvent, screen, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LockoutView } from '../bindings/LockoutView';
import { ok, renderWithServer } from '../test/fakeServer';
import { LockoutTable } from './LockoutTable';

const lockout = (model: string, remaining_ms: number, failures = 1): LockoutView => ({
  key: { provider: 'mock', credential: 'main', model },
  reason: { kind: 'rate_limit', status: 429 },
  consecutive_failures: failures,
  locked_until: Date.now() + remaining_ms,
  remaining_ms,
  recorded_by: null,
});

/** Lets the fake server's promises and React's updates settle, without real time passing. */
const settle = () => act(async () => {
  await vi.advanceTimersByTimeAsync(0);
});
const tick = (ms: number) => act(async () => {
  await vi.advanceTimersByTimeAsync(ms);
});

describe('LockoutTable', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('shows each lockout and counts its remaining time down every second', async () => {
    let active = [lockout('gpt-4o', 65_000, 3)];
    renderWithServer(<LockoutTable />, (call) => {
      if (call.method === 'GET' && call.path === '/api/resilience/lockouts') return ok(active);
      throw new Error(`unexpected ${call.method} ${call.path}`);
    });
    await settle();
    const row = screen.getByRole('row', { name: /gpt-4o/ });
    expect(within(row).getByText('mock')).toBeInTheDocument();
    expect(within(row).getByText('main')).toBeInTheDocument();
    expect(within(row).getByText('rate limit (429)')).toBeInTheDocument();
    expect(within(row).getByText('3')).toBeInTheDocument();
    expect(within(row).getByTestId('remaining')).toHaveTextContent('1m 05s');

    await tick(1000);
    expect(within(row).getByTestId('remaining')).toHaveTextContent('1m 04s');
    await tick(5000);
    expect(within(row).getByTestId('remaining')).toHaveTextContent('59s');

    // When it runs out the row goes, and the table re-reads the server.
    active = [];
    await tick(59_000);
    await settle();
    expect(screen.queryByRole('row', { name: /gpt-4o/ })).not.toBeInTheDocument();
    expect(screen.getByTestId('no-lockouts')).toBeInTheDocument();
  });

  it('clears one row with the key in the query, and re-reads', async () => {
    let active = [lockout('gpt-4o', 30_000), lockout('o3/mini', 30_000)];
    const { transport } = renderWithServer(<LockoutTable />, (call) => {
      if (call.method === 'GET') return ok(active);
      if (call.method === 'DELETE') {
        active = active.filter((l) => l.key.model !== 'o3/mini');
        return ok({ cleared: 1 });
      }
      throw new Error('unexpected');
    });
    await settle();
    expect(screen.getAllByTestId('lockout-row')).toHaveLength(2);

    fireEvent.click(screen.getByRole('button', { name: 'Clear lockout of mock/main/o3/mini' }));
    await settle();

    expect(transport.callsTo('DELETE', '/api/resilience/lockouts')).toEqual([
      { method: 'DELETE', path: '/api/resilience/lockouts?provider=mock&credential=main&model=o3%2Fmini', body: null },
    ]);
    expect(screen.getAllByTestId('lockout-row')).toHaveLength(1);
    expect(screen.getByRole('row', { name: /gpt-4o/ })).toBeInTheDocument();
  });

  it('clears all without a query, and shows the empty state', async () => {
    let active = [lockout('a', 30_000), lockout('b', 30_000)];
    const { transport } = renderWithServer(<LockoutTable />, (call) => {
      if (call.method === 'GET') return ok(active);
      active = [];
      return ok({ cleared: 2 });
    });
    await settle();
    fireEvent.click(screen.getByRole('button', { name: 'Clear all' }));
    await settle();
    expect(transport.callsTo('DELETE', '/api/resilience/lockouts')).toEqual([
      { method: 'DELETE', path: '/api/resilience/lockouts', body: null },
    ]);
    expect(screen.queryAllByTestId('lockout-row')).toHaveLength(0);
    expect(screen.getByTestId('no-lockouts')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Clear all' })).toBeDisabled();
  });

  it('shows why clearing failed and keeps the row', async () => {
    renderWithServer(<LockoutTable />, (call) =>
      call.method === 'GET'
        ? ok([lockout('a', 30_000)])
        : { status: 404, body: { error: { message: 'no such lockout', type: 'not_found_error', code: 404, switchyard: null } } },
    );
    await settle();
    fireEvent.click(screen.getByRole('button', { name: /Clear lockout of/ }));
    await settle();
    expect(screen.getByRole('alert')).toHaveTextContent('no such lockout');
    expect(screen.getAllByTestId('lockout-row')).toHaveLength(1);
  });

  it('re-reads when the server reports a change', async () => {
    let active: LockoutView[] = [];
    const { transport } = renderWithServer(<LockoutTable />, () => ok(active));
    await settle();
    expect(screen.getByTestId('no-lockouts')).toBeInTheDocument();
    active = [lockout('fresh', 10_000)];
    act(() => transport.live?.onEvent({ layer: 'lockout', key: active[0]!.key, record: null, at: 0 }));
    await settle();
    expect(screen.getByRole('row', { name: /fresh/ })).toBeInTheDocument();
  });
});
