import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import { lastTests } from '../forms/catalogue';
import { ok, renderWithServer } from '../test/fakeServer';
import { openai } from '../test/catalogueFixtures';
import { AddFromCatalogue } from './AddFromCatalogue';

function server(report: { ok: boolean; status: number | null; error: string | null }) {
  return (call: ApiCall) => {
    const route = `${call.method} ${call.path.split('?')[0]}`;
    switch (route) {
      case 'POST /api/providers':
        return ok({ ...(call.body as object) });
      case 'DELETE /api/providers/openai':
        return ok({ deleted: 'openai' });
      case 'POST /api/providers/openai/credentials':
        return ok({ id: 'main' });
      case 'POST /api/providers/openai/test':
        return ok({ credential: 'main', latency_ms: 12, models: report.ok ? 3 : null, ...report });
      case 'GET /api/providers/openai/models':
        return ok({ credential: 'main', models: ['o3', 'gpt-4o', 'gpt-ok'] });
      case 'PATCH /api/providers/openai':
        return ok({});
      case 'POST /api/combos':
        return ok(call.body);
      default:
        return { status: 404, body: null };
    }
  };
}

describe('AddFromCatalogue', () => {
  it('creates the preset with only what changed, tests it, and makes the suggested combo in one click', async () => {
    const onDone = vi.fn();
    const { transport } = renderWithServer(
      <AddFromCatalogue preset={openai} takenIds={[]} takenCombos={['main']} onCancel={() => {}} onDone={onDone} />,
      server({ ok: true, status: 200, error: null }),
    );
    expect(screen.getByLabelText('Base URL')).toHaveValue('https://api.openai.com/v1');
    await userEvent.type(screen.getByLabelText('API key'), 'sk-test-key');
    await userEvent.click(screen.getByRole('button', { name: 'Test connection' }));
    expect(await screen.findByTestId('first-run-report')).toHaveTextContent('Connected in 12 ms: 3 models listed.');

    // The key goes with the credential (to the keychain); the provider names only its preset.
    expect(transport.callsTo('POST', '/api/providers')[0]!.body).toEqual({ id: 'openai', preset: 'openai' });
    // The base URL was in front of the user: where its requests go is confirmed with it.
    expect(transport.callsTo('POST', '/api/providers')[0]!.path).toBe('/api/providers?confirm=true');
    expect(transport.callsTo('POST', '/api/providers/openai/credentials')[0]!.body).toEqual({ id: 'main', secret: 'sk-test-key' });
    expect(lastTests.all().openai?.ok).toBe(true);
    expect(screen.getByLabelText('API key')).toHaveValue('');

    // Discovered models with the catalogue's facts; the suggested one is chosen.
    const table = screen.getByRole('table', { name: 'Models to route to' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows.map((r) => r.textContent)).toEqual(['gpt-4o (suggested)128k$2.50 / $10.00', 'o3200k—', 'gpt-ok——']);
    expect(screen.getByLabelText('Use gpt-4o')).toBeChecked();
    expect(screen.getByLabelText('Use o3')).not.toBeChecked();
    await userEvent.click(screen.getByLabelText('Use o3'));

    await userEvent.click(screen.getByRole('button', { name: 'Create combo “main-2”' }));
    expect(await screen.findByTestId('first-run-done')).toHaveTextContent('Combo main-2 is ready');
    expect(transport.callsTo('PATCH', '/api/providers/openai')[0]!.body).toEqual({ models: ['gpt-4o', 'o3'] });
    const combo = { name: 'main-2', strategy: 'priority', targets: [{ target: 'openai/gpt-4o' }, { target: 'openai/o3' }] };
    expect(transport.callsTo('POST', '/api/combos')[0]!.body).toEqual(combo);
    expect(onDone).toHaveBeenCalledWith(combo);
    expect(screen.getByRole('link', { name: 'Connect your tools' })).toHaveAttribute('href', '#/connect');
  });

  it('sends a changed base URL, and after a failed test starts over', async () => {
    const { transport } = renderWithServer(
      <AddFromCatalogue preset={openai} takenIds={[]} takenCombos={[]} onCancel={() => {}} onDone={() => {}} />,
      server({ ok: false, status: 401, error: 'invalid key' }),
    );
    await userEvent.clear(screen.getByLabelText('Base URL'));
    await userEvent.type(screen.getByLabelText('Base URL'), 'http://127.0.0.1:9/v1');
    await userEvent.click(screen.getByRole('button', { name: 'Test connection' }));
    expect(await screen.findByTestId('first-run-report')).toHaveTextContent('The test failed (401): invalid key.');
    expect(screen.queryByRole('table', { name: 'Models to route to' })).toBeNull();
    expect(transport.callsTo('POST', '/api/providers')[0]!.body).toEqual({ id: 'openai', preset: 'openai', base_url: 'http://127.0.0.1:9/v1' });

    await userEvent.click(screen.getByRole('button', { name: 'Test connection' }));
    const created = () => transport.calls.filter((c) => c.method === 'POST' && c.path.split('?')[0] === '/api/providers');
    await waitFor(() => expect(created()).toHaveLength(2));
    expect(transport.callsTo('DELETE', '/api/providers/openai')).toHaveLength(1);
  });
});
