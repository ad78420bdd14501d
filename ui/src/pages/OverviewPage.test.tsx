import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { DoctorFinding } from '../bindings/DoctorFinding';
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

describe('the doctor on the overview', () => {
  const retired: DoctorFinding = {
    id: 'model_retired:oa/gpt-4o-mini',
    kind: 'model_retired',
    title: 'oa/gpt-4o-mini looks retired',
    evidence: ['not found on oa-1 (404)', 'not found on oa-2 (404)'],
    digest: 'seen-1',
    action: {
      kind: 'apply',
      says: 'remove gpt-4o-mini from oa and from combo "mini"',
      change: { change: 'retire', provider: 'oa', model: 'gpt-4o-mini', combos: ['mini'] },
    },
  };
  const refused: DoctorFinding = {
    id: 'key_refused:oa/oa-1',
    kind: 'key_refused',
    title: 'oa/oa-1 was refused',
    evidence: ['401 on the last 2 requests'],
    digest: 'seen-2',
    action: { kind: 'advice', says: 'replace the key of oa/oa-1', link: '#/providers' },
  };

  /** The server's doctor: `answers` in turn for GET /api/doctor, `applyReply` for each apply. */
  function doctorServer(answers: DoctorFinding[][], applyReply: (call: ApiCall) => ApiReply) {
    let looks = 0;
    return (call: ApiCall): ApiReply => {
      if (call.method === 'GET' && call.path === '/api/doctor') return ok(answers[Math.min(looks++, answers.length - 1)]);
      if (call.method === 'POST' && call.path.startsWith('/api/doctor/')) return applyReply(call);
      return server(call);
    };
  }

  it('lists each finding with its evidence and action, and Apply sends the digest shown, says what changed and reads the list again', async () => {
    const { transport } = renderWithServer(
      <OverviewPage />,
      doctorServer([[retired, refused], [refused]], () =>
        ok({ id: retired.id, dry_run: false, says: retired.action.says, change: (retired.action as { change: unknown }).change }),
      ),
    );
    const finding = await screen.findByRole('listitem', { name: 'oa/gpt-4o-mini looks retired' });
    expect(within(finding).getByText('not found on oa-1 (404)')).toBeInTheDocument();
    expect(within(finding).getByText('not found on oa-2 (404)')).toBeInTheDocument();
    expect(within(finding).getByText('remove gpt-4o-mini from oa and from combo "mini"')).toBeInTheDocument();
    expect(screen.getByTestId('doctor')).toHaveTextContent('2 findings');

    await userEvent.click(within(finding).getByRole('button', { name: /^Apply/ }));
    expect(await screen.findByTestId('doctor-applied')).toHaveTextContent('Applied: remove gpt-4o-mini from oa and from combo "mini".');
    const posted = transport.callsTo('POST', '/api/doctor/');
    expect(posted).toHaveLength(1);
    expect(posted[0]!.path).toBe('/api/doctor/model_retired%3Aoa%2Fgpt-4o-mini/apply');
    expect(posted[0]!.body).toEqual({ digest: 'seen-1' });
    await vi.waitFor(() => expect(screen.queryByRole('listitem', { name: 'oa/gpt-4o-mini looks retired' })).toBeNull());
    expect(screen.getByTestId('doctor')).toHaveTextContent('1 finding');
  });

  it('says the state changed and shows the list as it is now when the server refuses a stale digest', async () => {
    const changed: DoctorFinding = { ...retired, evidence: [...retired.evidence, 'not found on oa-3 (404)'], digest: 'seen-again' };
    const conflict = {
      error: { message: 'digest: the evidence changed since it was shown', type: 'invalid_request_error', code: 409, switchyard: { field: 'digest' } },
    };
    const { transport } = renderWithServer(<OverviewPage />, doctorServer([[retired], [changed]], () => ({ status: 409, body: conflict })));
    const finding = await screen.findByRole('listitem', { name: 'oa/gpt-4o-mini looks retired' });
    await userEvent.click(within(finding).getByRole('button', { name: /^Apply/ }));
    expect(await screen.findByTestId('doctor-stale')).toHaveTextContent('“oa/gpt-4o-mini looks retired” changed since it was shown: nothing was applied.');
    expect(await screen.findByText('not found on oa-3 (404)')).toBeInTheDocument();
    expect(screen.queryByTestId('doctor-applied')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();

    // Applying again sends the digest of what is shown now.
    await userEvent.click(within(screen.getByRole('listitem', { name: 'oa/gpt-4o-mini looks retired' })).getByRole('button', { name: /^Apply/ }));
    await vi.waitFor(() => expect(transport.callsTo('POST', '/api/doctor/')).toHaveLength(2));
    expect(transport.callsTo('POST', '/api/doctor/')[1]!.body).toEqual({ digest: 'seen-again' });
  });

  it('gives advice a link to where the fix is made, and no Apply button', async () => {
    renderWithServer(<OverviewPage />, doctorServer([[refused]], () => ok(null)));
    const finding = await screen.findByRole('listitem', { name: 'oa/oa-1 was refused' });
    expect(within(finding).getByText('replace the key of oa/oa-1')).toBeInTheDocument();
    expect(within(finding).getByRole('link', { name: 'Fix it there' })).toHaveAttribute('href', '#/providers');
    expect(within(finding).queryByRole('button')).toBeNull();
  });

  it('says nothing was found when the doctor finds nothing', async () => {
    renderWithServer(<OverviewPage />, server);
    expect(await screen.findByText('nothing found')).toBeInTheDocument();
  });
});

describe('a config written by a newer version', () => {
  it('is shown read-only, naming the version to update to and what does not run here', async () => {
    const readOnly: Health = {
      ...health,
      config_saved_to: {
        to: 'read_only',
        written_by: '0.9.0',
        version: 2,
        set_aside: ['providers[id=quantum]: unknown variant `quantum_llm`'],
        message: 'the config was written by Switchyard 0.9.0, newer than this one (0.1.0): it runs what this version understands and is read-only here; update to 0.9.0 or newer to edit it',
      },
    };
    renderWithServer(<OverviewPage />, (call) => (call.path === '/api/monitoring/health' ? ok(readOnly) : server(call)));
    const note = await screen.findByTestId('config-read-only');
    expect(note).toHaveTextContent('Written by Switchyard 0.9.0; update to edit.');
    expect(note).toHaveTextContent('Not running here (1)');
    expect(within(note).getByText(/providers\[id=quantum\]/)).toBeInTheDocument();
  });
});
