import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { LocalServers as Look } from '../bindings/LocalServers';
import type { ProviderView } from '../bindings/ProviderView';
import { ok, renderWithServer } from '../test/fakeServer';
import { catalogue, ollama } from '../test/catalogueFixtures';
import { LocalServers } from './LocalServers';

const presets = [...catalogue.providers, ollama];

function look(providers: string[] = []): Look {
  return {
    elapsed_ms: 301,
    probes: [
      {
        probed: 'ollama',
        port: 11434,
        elapsed_ms: 3,
        answer: {
          status: 'found',
          server: 'ollama',
          preset: 'ollama',
          base_url: 'http://127.0.0.1:11434/v1',
          models: ['llama3.2:latest', 'qwen2.5-coder:7b'],
          providers,
        },
      },
      { probed: 'lmstudio', port: 1234, elapsed_ms: 0, answer: { status: 'refused' } },
      { probed: 'llamacpp', port: 8080, elapsed_ms: 300, answer: { status: 'timed_out' } },
      { probed: 'vllm', port: 8000, elapsed_ms: 1, answer: { status: 'unrecognised', detail: 'answered HTTP 404 to GET /v1/models' } },
    ],
  };
}

const created = { id: 'ollama', preset: 'ollama', models: ['llama3.2:latest', 'qwen2.5-coder:7b'] } as unknown as ProviderView;

describe('LocalServers', () => {
  it('lists what answered with its models, and adds it in one click as its preset with the models it listed', async () => {
    let added = false;
    const server = (call: ApiCall) => {
      if (call.method === 'GET' && call.path === '/api/local-servers') return ok(look(added ? ['ollama'] : []));
      if (call.method === 'POST' && call.path === '/api/providers?confirm=true') {
        added = true;
        return { status: 201, body: created };
      }
      return { status: 404, body: null };
    };
    const onAdded = vi.fn();
    const { transport } = renderWithServer(<LocalServers presets={presets} providers={[]} onAdded={onAdded} />, server);

    const item = await screen.findByRole('listitem', { name: 'Ollama on port 11434' });
    expect(within(item).getByText('http://127.0.0.1:11434/v1')).toBeInTheDocument();
    expect(within(item).getByTestId('local-models')).toHaveTextContent('2 models: llama3.2:latest, qwen2.5-coder:7b');
    // Only what answered as a model server is offered.
    expect(screen.getAllByRole('listitem')).toHaveLength(1);

    await userEvent.click(within(item).getByRole('button', { name: 'Add Ollama' }));
    const posted = transport.callsTo('POST', '/api/providers');
    expect(posted).toHaveLength(1);
    // The address that answered, confirmed with the add (it is on the page).
    expect(posted[0]!.path).toBe('/api/providers?confirm=true');
    expect(posted[0]!.body).toEqual({
      id: 'ollama',
      preset: 'ollama',
      base_url: 'http://127.0.0.1:11434/v1',
      models: ['llama3.2:latest', 'qwen2.5-coder:7b'],
    });
    expect(onAdded).toHaveBeenCalledWith(created);
    // The look is read again, and the server is now the provider it became.
    expect(await within(await screen.findByRole('listitem', { name: 'Ollama on port 11434' })).findByText('added as ollama')).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Add Ollama' })).toBeNull();
  });

  it('takes a free provider id when the preset’s is taken', async () => {
    const moved = look();
    const answer = moved.probes[0]!.answer;
    if (answer.status !== 'found') throw new Error('fixture');
    answer.base_url = 'http://127.0.0.1:5001/v1';
    const server = (call: ApiCall) =>
      call.path === '/api/local-servers' ? ok(moved) : call.method === 'POST' ? { status: 201, body: created } : { status: 404, body: null };
    const taken = [{ id: 'ollama' }] as ProviderView[];
    const { transport } = renderWithServer(<LocalServers presets={presets} providers={taken} onAdded={() => {}} />, server);
    await userEvent.click(await screen.findByRole('button', { name: 'Add Ollama' }));
    expect(transport.callsTo('POST', '/api/providers')[0]!.body).toEqual({
      id: 'ollama-2',
      preset: 'ollama',
      base_url: 'http://127.0.0.1:5001/v1',
      models: ['llama3.2:latest', 'qwen2.5-coder:7b'],
    });
  });

  it('says so when nothing answered, and looks again on request', async () => {
    const nothing: Look = { elapsed_ms: 1, probes: look().probes.slice(1) };
    const { transport } = renderWithServer(<LocalServers presets={presets} providers={[]} onAdded={() => {}} />, (call) =>
      call.path === '/api/local-servers' ? ok(nothing) : { status: 404, body: null },
    );
    expect(await screen.findByTestId('no-local-servers')).toHaveTextContent(
      'No Ollama, LM Studio, llama.cpp or vLLM answered on this machine (ports 1234, 8080, 8000).',
    );
    expect(screen.queryByRole('list', { name: 'Servers on this machine' })).toBeNull();
    await userEvent.click(screen.getByRole('button', { name: 'Look again' }));
    expect(transport.callsTo('GET', '/api/local-servers')).toHaveLength(2);
  });
});
