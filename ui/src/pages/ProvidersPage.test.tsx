import { screen, within } from '@testing-library/react';
import userEventBase from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
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
  unconfirmed: [],
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
    expect(patches[0]?.path).toBe('/api/providers/oa?confirm=true');
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

describe('an unconfirmed credential', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  const pair = { reference: 'env:OPENAI_API_KEY', destination: 'https://collector.example:443' };
  const benched: ProviderView = {
    ...openai,
    credentials: [
      {
        id: 'main',
        kind: 'api_key',
        enabled: true,
        priority: 0,
        secret: { set: true, reference: 'env:OPENAI_API_KEY', unavailable: null, hint: null },
        unconfirmed: [pair],
      },
    ],
  };

  function confirming(after: ProviderView) {
    return (call: ApiCall): ApiReply => {
      if (call.method === 'POST') return ok(after);
      if (call.path === '/api/providers') return ok([benched]);
      return { status: 404, body: null };
    };
  }

  it('shows the status and sends the confirmation only after the user agreed to the host', async () => {
    const asked = vi.spyOn(window, 'confirm').mockReturnValue(true);
    const { transport } = renderWithServer(<ProvidersPage />, confirming({ ...benched, credentials: [] }));
    const card = within(await screen.findByRole('article', { name: 'Provider oa' }));
    expect(card.getByText('unconfirmed')).toBeInTheDocument();
    expect(card.getByTestId('unconfirmed-main')).toHaveTextContent('env:OPENAI_API_KEY to https://collector.example:443');

    await userEvent.click(card.getByRole('button', { name: 'Confirm credential main' }));

    expect(asked).toHaveBeenCalledWith('Send env:OPENAI_API_KEY to https://collector.example:443?');
    expect(transport.callsTo('POST', '/api/providers/oa/credentials/main/confirm')).toHaveLength(1);
  });

  it('sends nothing when the user declines', async () => {
    vi.spyOn(window, 'confirm').mockReturnValue(false);
    const { transport } = renderWithServer(<ProvidersPage />, confirming(benched));
    const card = within(await screen.findByRole('article', { name: 'Provider oa' }));
    await userEvent.click(card.getByRole('button', { name: 'Confirm credential main' }));
    expect(transport.callsTo('POST', '/api/providers/oa/credentials/main/confirm')).toHaveLength(0);
  });

  it('offers no Confirm button once every pair is confirmed', async () => {
    renderWithServer(<ProvidersPage />, server([{ ...benched, credentials: [{ ...benched.credentials[0]!, unconfirmed: [] }] }]));
    const card = within(await screen.findByRole('article', { name: 'Provider oa' }));
    expect(card.queryByRole('button', { name: 'Confirm credential main' })).toBeNull();
    expect(card.queryByText('unconfirmed')).toBeNull();
  });
});

describe('a keyless provider at an unconfirmed host', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  const requests = { reference: null, destination: 'https://collector.example:443' };
  const benched: ProviderView = { ...openai, id: 'collector', effective_base_url: 'https://collector.example/v1', unconfirmed: [requests] };

  it('says where its requests would go and confirms the provider only after the user agreed', async () => {
    const asked = vi.spyOn(window, 'confirm').mockReturnValue(true);
    const { transport } = renderWithServer(<ProvidersPage />, (call: ApiCall): ApiReply => {
      if (call.method === 'POST') return ok({ ...benched, unconfirmed: [] });
      if (call.path === '/api/providers') return ok([benched]);
      return { status: 404, body: null };
    });
    const card = within(await screen.findByRole('article', { name: 'Provider collector' }));
    expect(card.getByTestId('unconfirmed-provider-collector')).toHaveTextContent(
      'its requests (your prompts, and whatever your tools put in them) would go to https://collector.example:443',
    );

    await userEvent.click(card.getByRole('button', { name: 'Confirm provider collector' }));

    expect(asked).toHaveBeenCalledWith('Send requests to https://collector.example:443?');
    expect(transport.callsTo('POST', '/api/providers/collector/confirm')).toHaveLength(1);
  });

  it('sends nothing when the user declines', async () => {
    vi.spyOn(window, 'confirm').mockReturnValue(false);
    const { transport } = renderWithServer(<ProvidersPage />, server([benched]));
    const card = within(await screen.findByRole('article', { name: 'Provider collector' }));
    await userEvent.click(card.getByRole('button', { name: 'Confirm provider collector' }));
    expect(transport.callsTo('POST', '/api/providers/collector/confirm')).toHaveLength(0);
  });
});

describe("a credential's quota", () => {
  const pooled: ProviderView = {
    ...anthropic,
    credentials: ['k1', 'k2'].map((id) => ({
      id,
      kind: 'api_key' as const,
      enabled: true,
      priority: 0,
      secret: { set: true, reference: `env:${id.toUpperCase()}`, unavailable: null, hint: null },
      unconfirmed: [],
    })),
  };

  it('shows a bar per window and its reset, and says when a key is under its reserve', async () => {
    vi.useFakeTimers({ now: 1_800_000_000_000, toFake: ['Date'] });
    const headroom = [
      {
        provider: 'an',
        credential: 'k1',
        below_reserve: true,
        windows: [
          { name: 'requests', remaining: 0.03, resets_at: 1_800_000_090_000 },
          { name: 'tokens', remaining: 0.5, resets_at: null },
        ],
      },
    ];
    renderWithServer(<ProvidersPage />, (call: ApiCall): ApiReply => {
      if (call.path === '/api/providers') return ok([pooled]);
      if (call.path === '/api/monitoring/health') return ok({ headroom });
      return { status: 404, body: null };
    });
    const k1 = within(await screen.findByLabelText('Quota of k1'));
    const requests = k1.getByRole('meter', { name: 'Requests left on k1' });
    expect(requests).toHaveAttribute('aria-valuenow', '3');
    expect(requests).toHaveClass('meter-warn');
    expect(k1.getByRole('meter', { name: 'Tokens left on k1' })).not.toHaveClass('meter-warn');
    expect(k1.getByText('3 % left, resets in 1m 30s')).toBeInTheDocument();
    expect(k1.getByText('50 % left')).toBeInTheDocument();
    expect(k1.getByText('under its reserve')).toBeInTheDocument();
    // A key not measured yet shows nothing: unknown counts as headroom.
    expect(screen.queryByLabelText('Quota of k2')).toBeNull();
    vi.useRealTimers();
  });
});

describe('a credential whose secret cannot be read', () => {
  const waiting: ProviderView = {
    ...openai,
    id: 'or',
    credentials: [
      {
        id: 'main',
        kind: 'api_key',
        enabled: true,
        priority: 0,
        secret: { set: false, reference: 'file:/run/secrets/or', unavailable: 'file:/run/secrets/or does not exist (yet)', hint: null },
        unconfirmed: [],
      },
    ],
  };

  it('says why it waits and reads it again at once on Retry now', async () => {
    const ready: ProviderView = {
      ...waiting,
      credentials: [{ ...waiting.credentials[0]!, secret: { set: true, reference: 'file:/run/secrets/or', unavailable: null, hint: null } }],
    };
    let retried = false;
    const { transport } = renderWithServer(<ProvidersPage />, (call: ApiCall): ApiReply => {
      if (call.method === 'POST') {
        retried = true;
        return ok(ready);
      }
      if (call.path === '/api/providers') return ok([retried ? ready : waiting]);
      return { status: 404, body: null };
    });
    const card = within(await screen.findByRole('article', { name: 'Provider or' }));
    expect(card.getByText('waiting for its secret')).toBeInTheDocument();
    expect(card.getByTestId('secret-unavailable-main')).toHaveTextContent(
      'Not used until its secret can be read: file:/run/secrets/or does not exist (yet). It is read again every few seconds.',
    );
    await userEvent.click(card.getByRole('button', { name: 'Retry the secret of credential main now' }));
    expect(transport.callsTo('POST', '/api/providers/or/credentials/main/retry')).toHaveLength(1);
    await screen.findByText(/set \(file:\/run\/secrets\/or\)/);
    expect(screen.queryByText('waiting for its secret')).toBeNull();
    expect(screen.queryByRole('button', { name: /Retry the secret/ })).toBeNull();
  });
});
