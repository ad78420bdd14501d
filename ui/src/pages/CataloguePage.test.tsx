import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { Health } from '../bindings/Health';
import { ok, renderWithServer } from '../test/fakeServer';
import { catalogue } from '../test/catalogueFixtures';
import { CataloguePage } from './CataloguePage';

const health: Health = {
  paused: false,
  persistence: { durable: true, reason: null },
  config_saved_to: { to: 'state_file' },
  combos: [],
  team: null,
  at: 0,
  breakers: [{ provider: 'work', state: 'half_open', failures: 2, reopens: 1, last_fault: null, retry_in_ms: 0, probing_elsewhere: false, recorded_by: null }],
  credentials: [],
  lockouts: [],
  untracked: 0,
  probes: [],
};

function server(call: ApiCall) {
  switch (call.path) {
    case '/api/catalogue':
      return ok(catalogue);
    case '/api/providers':
      return ok([{ id: 'work', preset: 'groq', kind: 'openai', models: [], credentials: [] }]);
    case '/api/combos':
      return ok([]);
    case '/api/monitoring/health':
      return ok(health);
    default:
      return { status: 404, body: null };
  }
}

describe('CataloguePage', () => {
  it('lists the presets with the health of the configured ones, and opens the add form for the one picked', async () => {
    renderWithServer(<CataloguePage />, server);
    expect(screen.getByRole('heading', { name: 'Add from catalogue', level: 1 })).toBeInTheDocument();
    const groq = await screen.findByRole('listitem', { name: 'Groq' });
    expect(await within(groq).findByText('breaker half open')).toBeInTheDocument();
    expect(within(groq).getByText('configured as work')).toBeInTheDocument();
    expect(screen.getByText(/Model facts: models.dev, MIT licence, taken 2026-11-30/)).toBeInTheDocument();

    await userEvent.click(screen.getByRole('button', { name: 'Pick OpenAI' }));
    const form = screen.getByRole('form', { name: 'Connect OpenAI' });
    expect(within(form).getByLabelText('Provider name')).toHaveValue('openai');
    expect(screen.queryByRole('list', { name: 'Catalogue' })).toBeNull();
    await userEvent.click(within(form).getByRole('button', { name: 'Cancel' }));
    expect(screen.getByRole('list', { name: 'Catalogue' })).toBeInTheDocument();
  });

  it('offers the servers running on this machine, and after a one-click add says which model to send', async () => {
    const lm = { id: 'lmstudio', preset: 'lmstudio', kind: 'openai', models: ['qwen2.5-7b-instruct'], credentials: [] };
    const onSkip = vi.fn();
    renderWithServer(<CataloguePage firstRun onSkip={onSkip} />, (call: ApiCall) => {
      if (call.path === '/api/local-servers') {
        return ok({
          elapsed_ms: 2,
          probes: [
            {
              probed: 'lmstudio',
              port: 1234,
              elapsed_ms: 2,
              answer: { status: 'found', server: 'lmstudio', preset: 'lmstudio', base_url: 'http://localhost:1234/v1', models: ['qwen2.5-7b-instruct'], providers: [] },
            },
          ],
        });
      }
      if (call.method === 'POST' && call.path.startsWith('/api/providers')) return { status: 201, body: lm };
      return server(call);
    });
    const local = await screen.findByRole('region', { name: 'Runs on this machine' });
    await userEvent.click(await within(local).findByRole('button', { name: 'Add LM Studio' }));
    expect(await screen.findByTestId('local-added')).toHaveTextContent('Added provider lmstudio: send model: "lmstudio/qwen2.5-7b-instruct"');
    await userEvent.click(screen.getByRole('button', { name: 'Go to the overview' }));
    expect(onSkip).toHaveBeenCalled();
  });

  it('is the first run under its own heading, with a way past it', async () => {
    const onSkip = vi.fn();
    renderWithServer(<CataloguePage firstRun onSkip={onSkip} />, server);
    expect(screen.getByRole('heading', { name: 'Add your first provider', level: 1 })).toBeInTheDocument();
    await userEvent.click(screen.getByRole('button', { name: 'Skip for now' }));
    expect(onSkip).toHaveBeenCalled();
  });
});
