import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { Health } from '../bindings/Health';
import { ok, renderWithServer } from '../test/fakeServer';
import { chartsShown } from '../test/fakePlot';
import { budget, point, report, series } from '../test/usageFixtures';
import { OverviewPage, claudeCodeLines } from './OverviewPage';

const health: Health = {
  paused: false,
  persistence: { durable: true, reason: null },
  config_saved_to: { to: 'state_file' },
  combos: [{ name: 'smart', eligible: 1, candidates: 2 }],
  team: null,
  at: 0,
  breakers: [],
  credentials: [],
  lockouts: [],
  untracked: 0,
  probes: [],
};

function server(call: ApiCall): ApiReply {
  switch (call.path.split('?')[0]) {
    case '/api/server':
      return ok({ endpoint: 'http://127.0.0.1:5151/v1', version: '0.1.0' });
    case '/api/monitoring/health':
      return ok(health);
    case '/api/routing':
      return ok({ paused: false });
    case '/api/usage':
      return ok(report());
    default:
      return ok([]);
  }
}

describe('the Claude Code lines on the overview', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('name the real port without /v1, a key placeholder and a combo, and copy as shown', async () => {
    const writeText = vi.fn(async () => {});
    vi.stubGlobal('navigator', { ...navigator, clipboard: { writeText } });
    renderWithServer(<OverviewPage />, server);
    const expected = [
      'export ANTHROPIC_BASE_URL=http://127.0.0.1:5151',
      'export ANTHROPIC_AUTH_TOKEN=<your Switchyard local API key>',
      "export ANTHROPIC_MODEL=smart   # or leave it unset and let aliases route Claude Code's own model names",
    ].join('\n');
    const snippet = await screen.findByTestId('claude-code-env');
    await screen.findByText('1 of 2 ready');
    expect(snippet.textContent).toBe(expected);

    await userEvent.click(screen.getByRole('button', { name: /^Copy Claude Code settings/ }));
    expect(writeText).toHaveBeenCalledWith(expected);
    expect(screen.getByRole('button', { name: /^Copy Claude Code settings/ })).toHaveTextContent('Copied');
  });

  it('suggest aliases instead of a model when there is no combo', () => {
    const lines = claudeCodeLines('http://127.0.0.1:4141/v1', null).split('\n');
    expect(lines[0]).toBe('export ANTHROPIC_BASE_URL=http://127.0.0.1:4141');
    expect(lines[2]).toMatch(/^# ANTHROPIC_MODEL: leave it unset and let aliases route/);
  });
});

describe('recovery probes on the overview', () => {
  it('show a benched provider being probed and what the last probe found', async () => {
    const probing: Health = {
      ...health,
      breakers: [{ provider: 'oa', state: 'half_open', failures: 5, reopens: 0, last_fault: 'transient', retry_in_ms: 0, probing_elsewhere: false, recorded_by: null }],
      probes: [
        { scope: { layer: 'provider', provider: 'oa' }, probing: true, last: null },
        {
          scope: { layer: 'model', key: { provider: 'an', credential: 'work', model: 'claude' } },
          probing: false,
          last: { at: Date.now(), bench: 'model_lock_lapsed', outcome: 'success', status: 200, healed: true },
        },
      ],
    };
    const routes = (call: ApiCall): ApiReply => {
      const path = call.path.split('?')[0];
      if (path === '/api/monitoring/health') return ok(probing);
      if (path === '/api/providers') return ok([{ id: 'oa', credentials: [] }]);
      return server(call);
    };
    renderWithServer(<OverviewPage />, routes);
    const list = await screen.findByRole('heading', { name: 'Recovery probes' });
    expect(list).toBeInTheDocument();
    expect(screen.getByText('an/claude on work')).toBeInTheDocument();
    expect(screen.getAllByText('probing').length).toBeGreaterThanOrEqual(2);
    expect(screen.getByText('back')).toBeInTheDocument();
  });
});

describe('quota on the overview', () => {
  it("shows each measured key's windows on its provider's card", async () => {
    const measured: Health = {
      ...health,
      headroom: [{ provider: 'oa', credential: 'k1', below_reserve: false, subscription: false, windows: [{ name: '5h', remaining: 0.4, resets_at: null }] }],
    };
    renderWithServer(<OverviewPage />, (call: ApiCall): ApiReply => {
      const path = call.path.split('?')[0];
      if (path === '/api/monitoring/health') return ok(measured);
      if (path === '/api/providers') return ok([{ id: 'oa', credentials: [] }]);
      return server(call);
    });
    const card = await screen.findByRole('article', { name: 'Provider oa' });
    const meter = await within(card).findByRole('meter', { name: '5-hour window left on k1' });
    expect(meter).toHaveAttribute('aria-valuenow', '40');
    expect(within(card).queryByText('under its reserve')).toBeNull();
  });
});

describe('usage on the overview', () => {
  it('charts the last 7 days` spend and tokens by provider, with their totals', async () => {
    const week = report({
      group_by: 'provider',
      groups: [series('mock', [point({ requests: 3, cost_nanodollars: 18_450_000, cost: '0.01845', uncached_input: 3600, cache_read: 900, output: 1350 }), ...Array.from({ length: 6 }, () => point())])],
    });
    const { transport } = renderWithServer(<OverviewPage />, (call) => (call.path.startsWith('/api/usage?') ? ok(week) : server(call)));
    expect(await screen.findByTestId('week-spend')).toHaveTextContent('$0.01845');
    expect(screen.getByTestId('week-tokens')).toHaveTextContent('5.9k');
    expect(screen.getByTestId('week-requests')).toHaveTextContent('3');
    await vi.waitFor(() => expect([...chartsShown().keys()].sort()).toEqual(['Spend per day, last 7 days', 'Tokens per day, last 7 days']));
    expect(chartsShown().get('Spend per day, last 7 days')!.data[1]![0]).toBe(0.01845);
    const asked = transport.callsTo('GET', '/api/usage?')[0]!.path;
    expect(asked).toMatch(/^\/api\/usage\?from=\d{4}-\d{2}-\d{2}&to=\d{4}-\d{2}-\d{2}&bucket=day&group_by=provider$/);
  });

  it('says there is nothing yet, and warns of a budget at 80 %', async () => {
    const warned = budget({ percent: 85, state: 'warning', spent: '4.25' });
    renderWithServer(<OverviewPage />, (call) => (call.path === '/api/usage/budgets' ? ok([warned]) : server(call)));
    expect(await screen.findByText(/No requests in the last 7 days/)).toBeInTheDocument();
    expect(await screen.findByTestId('budget-warning')).toHaveTextContent('The daily budget over every request is 85 % spent ($4.25 of $5.00)');
  });
});

describe('the team on the overview', () => {
  const team = {
    instance: 'b',
    connected: true,
    reason: null,
    since: 0,
    members: [
      { id: 'a', version: '0.1.0', seen_ms_ago: 1_000 },
      { id: 'b', version: '0.1.0', seen_ms_ago: 0 },
    ],
    clock_offset_ms: 300_000,
    backlog: 0,
    dropped: 0,
  };
  const routes = (page: Health) => (call: ApiCall): ApiReply => {
    const path = call.path.split('?')[0];
    if (path === '/api/monitoring/health') return ok(page);
    return server(call);
  };

  it('lists the instances seen lately, says state is shared and who recorded a lock', async () => {
    const page: Health = {
      ...health,
      team,
      lockouts: [
        {
          key: { provider: 'oa', credential: 'main', model: 'gpt-4o' },
          reason: { kind: 'rate_limit', status: 429 },
          consecutive_failures: 1,
          locked_until: Date.now() + 30_000,
          remaining_ms: 30_000,
          recorded_by: 'a',
        },
      ],
    };
    renderWithServer(<OverviewPage />, routes(page));
    const card = await screen.findByTestId('team-card');
    expect(card).toHaveTextContent('sharing');
    expect(card).toHaveTextContent('This instance is b; its clock is 300 s behind the database');
    expect(screen.getByRole('table', { name: 'Team instances' })).toHaveTextContent('b (this one)');
    expect(screen.getByText('a', { selector: 'strong' })).toBeInTheDocument();
    expect(screen.queryByTestId('team-offline')).toBeNull();
  });

  it('says which instance reported a key refused, benched here for a bounded time only', async () => {
    const page: Health = {
      ...health,
      team,
      credentials: [
        {
          key: { provider: 'oa', credential: 'main' },
          status: 'cooling',
          backoff_level: 1,
          retry_in_ms: 120_000,
          recorded_by: 'a',
          last_error: 'auth',
        },
      ],
    };
    renderWithServer(<OverviewPage />, routes(page));
    expect(await screen.findByTestId('reported-refused')).toHaveTextContent('a reported this key refused; benched here for a bounded time only');
  });

  it('says so when the team database cannot be reached', async () => {
    const page: Health = { ...health, team: { ...team, connected: false, reason: 'team database: connection refused', backlog: 3 } };
    renderWithServer(<OverviewPage />, routes(page));
    expect(await screen.findByTestId('team-offline')).toHaveTextContent('The team database cannot be reached (team database: connection refused)');
    expect(screen.getByTestId('team-card')).toHaveTextContent('not sharing');
    expect(screen.getByTestId('team-card')).toHaveTextContent('3 changes waiting for the database');
  });

  it('shows nothing of a team when there is none', async () => {
    renderWithServer(<OverviewPage />, server);
    await screen.findByText('1 of 2 ready');
    expect(screen.queryByTestId('team-card')).toBeNull();
  });
});
