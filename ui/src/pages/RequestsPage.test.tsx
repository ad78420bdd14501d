import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { RequestEntry } from '../bindings/RequestEntry';
import { ok, renderWithServer } from '../test/fakeServer';
import { RequestsPage } from './RequestsPage';

const entry: RequestEntry = {
  at: Date.now() - 1000,
  dialect: 'openai',
  model: 'smart',
  served_by: 'groq/llama',
  status: 200,
  attempts: 2,
  duration_ms: 420,
  outcome: 'broken',
  first_byte_ms: 410,
  usage: { uncached_input: 100, cache_read: 900, cache_write: 0, output: 42, reasoning: 0, estimated: false },
  cost: '0.000315',
  local_key: 'key_1a2b3c4d',
  combo: 'smart',
  fallback: true,
  trace: [
    { target: 'openai/gpt-4o', credential: 'main', event: 'skipped', reason: 'model_locked' },
    { target: 'anthropic/sonnet', credential: 'work', event: 'attempted', outcome: 'timeout', status: null, millis: 15000, path: 'passthrough' },
    {
      target: 'groq/llama',
      credential: 'main',
      event: 'attempted',
      outcome: 'success',
      status: 200,
      millis: 400,
      path: 'translated',
      dropped: ['context_management', 'cache_control'],
    },
  ],
};

describe('RequestsPage', () => {
  it('expands a request into its routing trace: skips, attempts, timings', async () => {
    renderWithServer(<RequestsPage />, () => ok([entry]));
    const expand = await screen.findByRole('button', { name: 'Show routing trace of request 1' });
    expect(screen.queryByRole('table', { name: 'Routing trace of request 1' })).not.toBeInTheDocument();
    await userEvent.click(expand);
    const trace = screen.getByRole('table', { name: 'Routing trace of request 1' });
    const rows = within(trace).getAllByRole('row').slice(1);
    expect(rows.map((r) => r.textContent)).toEqual([
      '1openai/gpt-4omainskipped model locked',
      '2anthropic/sonnetworkattempted timeout · passthrough—15000 ms',
      '3groq/llamamainattempted success · translatednot carried: context_management, cache_control200400 ms',
    ]);
    expect(screen.getByText('broken', { exact: false })).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Hide routing trace of request 1' })).toHaveAttribute('aria-expanded', 'true');
  });

  it('shows each request`s tokens and cost, what they are made of on hover', async () => {
    renderWithServer(<RequestsPage />, () => ok([entry, { ...entry, usage: null, cost: null }]));
    const rows = await screen.findAllByTestId('request-row');
    const tokens = within(rows[0]!).getByText('1,000 → 42');
    expect(tokens).toHaveAttribute('title', '100 uncached input, 900 cache read, 0 cache write, 42 output (0 reasoning)');
    expect(within(rows[0]!).getByText('$0.00031')).toBeInTheDocument();
    // Unknown usage and cost (no upstream reported any, or no price) say so.
    expect(within(rows[1]!).getAllByText('—').length).toBeGreaterThanOrEqual(2);
  });

  it('sends the filters as the query', async () => {
    const { transport } = renderWithServer(<RequestsPage />, () => ok([]));
    await screen.findByText('No request matches.');
    await userEvent.click(screen.getByLabelText('Only fallbacks'));
    await userEvent.selectOptions(screen.getByLabelText('Outcome'), 'error');
    await userEvent.type(screen.getByLabelText('Model'), 'smart');
    const last = transport.calls.at(-1)!;
    expect(last.path).toBe('/api/requests?limit=100&model=smart&outcome=error&fallback=true');
  });

  it('pages through the whole history, older pages by offset, back to the newest when a filter changes', async () => {
    // Sixty requests on the server, newest first; a page of 25.
    const all = Array.from({ length: 60 }, (_, i) => ({ ...entry, model: `m${i}` }));
    const { transport } = renderWithServer(<RequestsPage />, (call) => {
      const q = new URLSearchParams(call.path.split('?')[1]);
      const offset = Number(q.get('offset') ?? 0);
      return ok(all.filter((r) => !q.get('model') || r.model === q.get('model')).slice(offset, offset + Number(q.get('limit'))));
    });
    await screen.findAllByTestId('request-row');
    await userEvent.selectOptions(screen.getByLabelText('Show'), '25');
    await screen.findByText('1–25');
    expect(screen.getByRole('button', { name: 'Newer' })).toBeDisabled();
    await userEvent.click(screen.getByRole('button', { name: 'Older' }));
    await screen.findByText('26–50');
    expect(transport.calls.at(-1)!.path).toBe('/api/requests?limit=25&offset=25');
    await userEvent.click(screen.getByRole('button', { name: 'Older' }));
    await screen.findByText('51–60');
    expect(screen.getAllByTestId('request-row')[0]).toHaveTextContent('m50');
    expect(screen.getByRole('button', { name: 'Older' })).toBeDisabled();
    await userEvent.click(screen.getByRole('button', { name: 'Newer' }));
    await screen.findByText('26–50');

    await userEvent.type(screen.getByLabelText('Model'), 'm3');
    await screen.findByText('m3');
    expect(screen.getAllByTestId('request-row')).toHaveLength(1);
    expect(transport.calls.at(-1)!.path).toBe('/api/requests?limit=25&model=m3');
    expect(screen.queryByRole('navigation', { name: 'Pages of requests' })).not.toBeInTheDocument();
  });
});
