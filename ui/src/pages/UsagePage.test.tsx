import { act, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { BudgetView } from '../bindings/BudgetView';
import type { UsageReport } from '../bindings/UsageReport';
import { chartsShown, legendAt } from '../test/fakePlot';
import { ok, renderWithServer } from '../test/fakeServer';
import { budget, DAY, point, report, series } from '../test/usageFixtures';
import { UsagePage } from './UsagePage';

// 2026-02-07 15:00 UTC: "7 days" is 2026-02-01 to 2026-02-07.
const NOW = Date.UTC(2026, 1, 7, 15);
const FEB_1 = Date.UTC(2026, 1, 1);
const HOUR = 3_600_000;
const nano = (usd: number) => Math.round(usd * 1e9);

const byModel = report({
  from: FEB_1,
  group_by: 'model',
  groups: [
    series('mock/gpt-ok', [
      point({ requests: 2, fallbacks: 1, cost_nanodollars: nano(0.0123), cost: '0.0123', uncached_input: 2400, cache_read: 600, output: 900, reasoning: 100 }),
      ...Array.from({ length: 5 }, () => point()),
      point({ requests: 1, cost_nanodollars: nano(0.00615), cost: '0.00615', uncached_input: 1200, cache_read: 300, output: 450, reasoning: 50, estimated: 1 }),
    ]),
    series('mock/unpriced', [point({ requests: 1, uncached_input: 10, output: 5, cost_unknown: 1, errors: 1 }), ...Array.from({ length: 6 }, () => point())]),
  ],
});
const byProvider = report({
  from: FEB_1,
  group_by: 'provider',
  groups: [series('mock', byModel.totals.map((p, i) => ({ ...p, ttft_samples: i === 6 ? 1 : 0, ttft_p50_ms: i === 6 ? 42 : null, ttft_p95_ms: i === 6 ? 42 : null })))],
});
const byKey = report({
  from: FEB_1,
  group_by: 'key',
  groups: [series('editor', byModel.totals, 'key_1')],
});
const bySession = report({
  from: FEB_1,
  group_by: 'session',
  groups: [series('0123456789ab', byModel.totals, '0123456789abcdef0123456789abcdef')],
});
const hourly = report({ from: FEB_1, buckets: 7 * 24, width: HOUR, totals: Array.from({ length: 7 * 24 }, (_, i) => (i === 10 ? point({ requests: 3, fallbacks: 1 }) : point())) });

function answer(call: ApiCall, budgets: BudgetView[] = [], reports: Partial<Record<string, UsageReport>> = {}): ApiReply {
  const url = new URL(call.path, 'http://ui');
  const q = url.searchParams;
  switch (url.pathname) {
    case '/api/usage': {
      const chosen = reports[`${q.get('bucket')}/${q.get('group_by') ?? ''}`];
      if (chosen) return ok(chosen);
      if (q.get('bucket') === 'hour') return ok(hourly);
      if (q.get('group_by') === 'provider') return ok(byProvider);
      if (q.get('group_by') === 'key') return ok(byKey);
      if (q.get('group_by') === 'session') return ok(bySession);
      return ok(byModel);
    }
    case '/api/usage.csv':
      return { status: 200, body: 'bucket_start,group,label\n' };
    case '/api/usage/budgets':
      return ok(budgets);
    case '/api/settings/usage':
      return ok({ tracking: true, retention_days: 400 });
    default:
      return ok([]);
  }
}

const usageCalls = (calls: ApiCall[]) => calls.filter((c) => c.path.startsWith('/api/usage?')).map((c) => c.path);

describe('the Usage page', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(NOW);
  });
  afterEach(() => vi.useRealTimers());

  it('shows the range`s totals exactly as the server counted them', async () => {
    renderWithServer(<UsagePage />, (call) => answer(call));
    expect(await screen.findByTestId('total-spend')).toHaveTextContent('$0.01845');
    expect(screen.getByTestId('total-requests')).toHaveTextContent('4');
    expect(screen.getByTestId('total-fallbacks')).toHaveTextContent('1');
    expect(screen.getByTestId('total-errors')).toHaveTextContent('1');
    expect(screen.getByTestId('total-tokens')).toHaveTextContent('5.9k');
    expect(screen.getByTestId('tokens-uncached_input')).toHaveTextContent('3,610');
    expect(screen.getByTestId('tokens-cache_read')).toHaveTextContent('900');
    expect(screen.getByTestId('tokens-output')).toHaveTextContent('1,355');
    expect(screen.getByTestId('tokens-reasoning')).toHaveTextContent('150');
    expect(screen.getByText(/1 request used tokens at a price not known/)).toBeInTheDocument();
    expect(screen.getByText(/1 request’s counts are an estimate/)).toBeInTheDocument();
    expect(screen.getByTestId('usage-range')).toHaveTextContent('2026-02-01 to 2026-02-07 (UTC), by the day');
  });

  it('asks for 7 days by the day, per model, per provider, per key, per session, and the same days by the hour', async () => {
    const { transport } = renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    expect(usageCalls(transport.calls).sort()).toEqual([
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=key',
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=model',
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=provider',
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=session',
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=hour',
    ]);
    // What one agent task cost, by the session's short id (as the routing trace shows it).
    const sessions = screen.getByRole('table', { name: 'Top agent sessions by spend' });
    expect(within(sessions).getByText('0123456789ab')).toBeInTheDocument();
    expect(within(sessions).getByText('$0.01845')).toBeInTheDocument();
  });

  it('charts spend and tokens stacked by model, in dollars, and requests and fallbacks per hour', async () => {
    renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    await vi.waitFor(() => expect(chartsShown().size).toBe(3));
    const charts = chartsShown();
    const spend = charts.get('Spend per day by model')!;
    // One priced model: its spend per day, in dollars; the unpriced one draws nothing.
    expect(spend.opts.series.slice(1).map((s) => s.label)).toEqual(['mock/gpt-ok']);
    expect(spend.data[0]).toEqual(byModel.buckets);
    // A day without spend draws no bar.
    expect(spend.data[1]).toEqual([0.0123, null, null, null, null, null, 0.00615]);
    expect(legendAt(spend, 6)).toEqual({ 'mock/gpt-ok': '$0.0062' });
    // Away from the bars, the legend holds the range's totals.
    expect(legendAt(spend, null)).toEqual({ 'mock/gpt-ok': '$0.018' });

    const tokens = charts.get('Tokens per day by model')!;
    expect(tokens.opts.series.slice(1).map((s) => s.label)).toEqual(['mock/gpt-ok', 'mock/unpriced']);
    // Stacked: the first series is drawn to the top of the stack, the legend tells its own value.
    expect(tokens.data[1]![0]).toBe(3900 + 15);
    expect(tokens.data[2]![0]).toBe(15);
    expect(legendAt(tokens, 0)).toEqual({ 'mock/gpt-ok': '3.9k', 'mock/unpriced': '15' });

    const activity = charts.get('Requests and fallbacks per hour')!;
    expect(activity.data[0]).toHaveLength(7 * 24);
    expect(legendAt(activity, 10)).toEqual({ Requests: '3', Fallbacks: '1' });
    expect(legendAt(activity, null)).toEqual({ Requests: '3', Fallbacks: '1' });
  });

  it('lists time to first token per provider and the keys that spent the most', async () => {
    renderWithServer(<UsagePage />, (call) => answer(call));
    const ttft = await screen.findByRole('table', { name: 'Time to first token by provider' });
    expect(within(ttft).getAllByRole('row')[1]).toHaveTextContent('mock42 ms42 ms1');
    const keys = screen.getByRole('table', { name: 'Top keys by spend' });
    expect(within(keys).getAllByRole('row')[1]).toHaveTextContent('editor$0.018454');
  });

  it('stacks by provider on request, without asking for providers twice', async () => {
    const { transport } = renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    transport.calls.length = 0;
    await userEvent.click(screen.getByRole('radio', { name: 'Provider' }));
    await vi.waitFor(() => expect(chartsShown().has('Spend per day by provider')).toBe(true));
    expect(usageCalls(transport.calls).filter((p) => p.includes('group_by=provider'))).toEqual([
      '/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=provider',
    ]);
  });

  it('shows today by the hour, and other ranges by their days', async () => {
    const { transport } = renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    transport.calls.length = 0;
    await userEvent.click(screen.getByRole('radio', { name: 'Today' }));
    await vi.waitFor(() => expect(usageCalls(transport.calls)).toHaveLength(4));
    expect(usageCalls(transport.calls).sort()).toEqual([
      '/api/usage?from=2026-02-07&to=2026-02-07&bucket=hour&group_by=key',
      '/api/usage?from=2026-02-07&to=2026-02-07&bucket=hour&group_by=model',
      '/api/usage?from=2026-02-07&to=2026-02-07&bucket=hour&group_by=provider',
      '/api/usage?from=2026-02-07&to=2026-02-07&bucket=hour&group_by=session',
    ]);
    transport.calls.length = 0;
    await userEvent.click(screen.getByRole('radio', { name: 'This month' }));
    await vi.waitFor(() => expect(usageCalls(transport.calls)).toContain('/api/usage?from=2026-02-01&to=2026-02-07&bucket=day&group_by=model'));
    transport.calls.length = 0;
    await userEvent.click(screen.getByRole('radio', { name: '30 days' }));
    await vi.waitFor(() => expect(usageCalls(transport.calls)).toContain('/api/usage?from=2026-01-09&to=2026-02-07&bucket=hour'));
  });

  it('takes custom days, refuses impossible ones at their field without asking, and places the server`s refusal', async () => {
    const refusal = { error: { message: 'from: 2025-02-30 is not a day', type: 'invalid_request_error', code: 400, switchyard: { field: 'from' } } };
    const { transport } = renderWithServer(<UsagePage />, (call) =>
      call.path.includes('from=2020-01-01') ? { status: 400, body: refusal } : answer(call),
    );
    await screen.findByTestId('total-spend');
    await userEvent.click(screen.getByRole('radio', { name: 'Custom' }));
    const from = screen.getByLabelText('From (UTC day)');
    const to = screen.getByLabelText('To (UTC day, included)');
    expect(from).toHaveValue('2026-02-01');
    expect(to).toHaveValue('2026-02-07');

    transport.calls.length = 0;
    await userEvent.clear(to);
    await userEvent.type(to, '2026-01-15');
    expect(await screen.findByText('The last day is before the first')).toBeInTheDocument();
    expect(to).toHaveAttribute('aria-invalid', 'true');
    expect(usageCalls(transport.calls).filter((p) => p.includes('to=2026-01-15'))).toEqual([]);

    await userEvent.clear(from);
    await userEvent.type(from, '2020-01-01');
    expect(await screen.findByText('2025-02-30 is not a day')).toBeInTheDocument();
    expect(from).toHaveAttribute('aria-invalid', 'true');
  });

  it('reads again when requests complete, heard on the event stream', async () => {
    const { transport } = renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    const before = transport.callsTo('GET', '/api/usage?').length;
    await act(async () => {
      transport.live!.onRequest();
      // The page's throttle (0 ms in tests) fires inside act.
      await new Promise((resolve) => setTimeout(resolve, 0));
    });
    await vi.waitFor(() => expect(transport.callsTo('GET', '/api/usage?').length).toBe(before + 5));
    expect(transport.callsTo('GET', '/api/usage/budgets').length).toBe(2);
    // The figures shown are the new answer's.
    expect(await screen.findByTestId('total-spend')).toHaveTextContent('$0.01845');
  });

  it('downloads the view shown as CSV', async () => {
    // jsdom cannot follow the download link; record which file the click would save instead.
    const saved: string[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      saved.push(this.download);
    });
    const { transport } = renderWithServer(<UsagePage />, (call) => answer(call));
    await screen.findByTestId('total-spend');
    await userEvent.click(screen.getByRole('button', { name: 'Download CSV' }));
    expect(await screen.findByText('switchyard-usage-2026-02-01-to-2026-02-07-by-model.csv')).toBeInTheDocument();
    expect(saved).toEqual(['switchyard-usage-2026-02-01-to-2026-02-07-by-model.csv']);
    expect(transport.callsTo('GET', '/api/usage.csv').map((c) => c.path)).toEqual([
      '/api/usage.csv?from=2026-02-01&to=2026-02-07&bucket=day&group_by=model',
    ]);
  });

  it('says what to do when the range has no request, no budget or no streamed request', async () => {
    const empty = report({ from: FEB_1 });
    renderWithServer(<UsagePage />, (call) => answer(call, [], { 'day/model': empty, 'day/provider': empty, 'day/key': empty, 'hour/': report({ from: FEB_1, buckets: 168, width: HOUR }) }));
    expect(await screen.findByRole('heading', { name: 'No requests in this range' })).toBeInTheDocument();
    expect(screen.getByRole('link', { name: 'Connect your tools' })).toHaveAttribute('href', '#/connect');
    expect(await screen.findByText(/No budget set/)).toBeInTheDocument();
    expect(chartsShown().size).toBe(0);
  });

  it('shows each subscription`s windows by account, as covered by the plan, and no API key`s', async () => {
    const window = { name: '5h', remaining: 0.25, resets_at: NOW + 2 * HOUR };
    const headroom = [
      { provider: 'claude-sub', credential: 'login~3f2a1b9c0d1e', below_reserve: false, subscription: true, windows: [window] },
      { provider: 'anthropic', credential: 'key-1', below_reserve: false, subscription: false, windows: [window] },
    ];
    renderWithServer(<UsagePage />, (call) => (call.path.startsWith('/api/monitoring/health') ? ok({ headroom }) : answer(call)));
    const section = await screen.findByTestId('usage-subscriptions');
    expect(within(section).getByText(/covered by the plan/)).toBeInTheDocument();
    expect(within(section).getByLabelText('Quota of claude-sub: login · account 3f2a1b9c0d1e')).toBeInTheDocument();
    expect(within(section).queryByLabelText(/anthropic/)).toBeNull();
  });

  it('says when nothing served had a price, and when no request was streamed', async () => {
    const unpriced = report({ from: FEB_1, group_by: 'model', groups: [series('local/llama', [point({ requests: 2, uncached_input: 50, output: 5, cost_unknown: 2 }), ...Array.from({ length: 6 }, () => point())])] });
    const providers = report({ from: FEB_1, group_by: 'provider', groups: [series('local', unpriced.totals)] });
    renderWithServer(<UsagePage />, (call) => answer(call, [], { 'day/model': unpriced, 'day/provider': providers }));
    expect(await screen.findByText(/Nothing served in this range has a known price/)).toBeInTheDocument();
    expect(screen.getByText(/No streamed request was served in this range/)).toBeInTheDocument();
  });

  it('warns from 80 % of a budget and says when an enforced one refuses requests', async () => {
    const budgets = [
      budget({ key: 'editor', limit: '0.0045', spent: '0.004', percent: 88, state: 'warning', resets_at: FEB_1 + 7 * DAY }),
      budget({ period: 'monthly', enforce: true, limit: '0.01', spent: '0.01845', percent: 184, state: 'reached', resets_at: Date.UTC(2026, 2, 1) }),
    ];
    renderWithServer(<UsagePage />, (call) => answer(call, budgets));
    expect(await screen.findByTestId('budget-warning')).toHaveTextContent('The daily budget of key “editor” is 88 % spent ($0.004 of $0.0045)');
    expect(screen.getByTestId('budget-refusal')).toHaveTextContent('Requests are refused: the monthly budget over every request is spent ($0.018 of $0.01)');
    const meters = screen.getAllByRole('meter');
    expect(meters.map((m) => [m.getAttribute('aria-label'), m.getAttribute('aria-valuenow')])).toEqual([
      ['Daily, key “editor”', '88'],
      ['Monthly, every request', '100'],
    ]);
  });
});
