import { screen, within } from '@testing-library/react';
import userEventBase from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { ProviderView } from '../bindings/ProviderView';
import { ok, renderWithServer } from '../test/fakeServer';
import { ProvidersPage } from './ProvidersPage';

const userEvent = userEventBase.setup({ delay: null });

const openai: ProviderView = {
  id: 'oa',
  preset: null,
  kind: 'openai',
  base_url: null,
  effective_base_url: 'https://api.openai.com/v1',
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: ['gpt-4o', { id: 'gpt-5-codex', api: 'responses' }],
  headers: {},
  credentials: [],
  passthrough: true,
  api: null,
};

const anthropic: ProviderView = { ...openai, id: 'an', kind: 'anthropic', effective_base_url: 'https://api.anthropic.com', models: ['claude'] };

function server(providers: ProviderView[]) {
  return (call: ApiCall): ApiReply => {
    if (call.method === 'PATCH') return ok(providers[0]);
    if (call.path === '/api/providers') return ok(providers);
    return { status: 404, body: null };
  };
}

describe('the provider editor', () => {
  it('edits an OpenAI provider’s API, passthrough and a model’s own API', async () => {
    const { transport } = renderWithServer(<ProvidersPage />, server([openai]));
    const card = within(await screen.findByRole('article', { name: 'Provider oa' }));
    await userEvent.click(card.getByRole('button', { name: 'Edit' }));
    const form = within(card.getByRole('form', { name: 'Edit provider oa' }));

    const api = form.getByLabelText('API');
    expect(api).toHaveValue('chat');
    const passthrough = form.getByLabelText('Pass through same-dialect requests');
    expect(passthrough).toBeChecked();
    const models = form.getByLabelText('Models');
    expect(models).toHaveValue('gpt-4o\ngpt-5-codex (responses)');

    await userEvent.selectOptions(api, 'responses');
    await userEvent.click(passthrough);
    await userEvent.clear(models);
    await userEvent.type(models, 'gpt-4o (chat){Enter}gpt-5-codex');
    await userEvent.click(form.getByRole('button', { name: 'Save provider' }));

    const patches = transport.callsTo('PATCH', '/api/providers/oa');
    expect(patches).toHaveLength(1);
    expect(patches[0]?.body).toEqual({
      api: 'responses',
      passthrough: false,
      models: [{ id: 'gpt-4o', api: 'chat' }, 'gpt-5-codex'],
    });
  });

  it('offers passthrough but no API choice for other kinds', async () => {
    renderWithServer(<ProvidersPage />, server([anthropic]));
    const card = within(await screen.findByRole('article', { name: 'Provider an' }));
    await userEvent.click(card.getByRole('button', { name: 'Edit' }));
    const form = within(card.getByRole('form', { name: 'Edit provider an' }));
    expect(form.queryByLabelText('API')).toBeNull();
    expect(form.getByLabelText('Pass through same-dialect requests')).toBeChecked();
  });
});
