import { screen, within } from '@testing-library/react';
import userEventBase from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { AliasesForm } from '../bindings/AliasesForm';
import type { ComboForm } from '../bindings/ComboForm';
import type { ProviderView } from '../bindings/ProviderView';
import { ok, renderWithServer } from '../test/fakeServer';
import { CombosPage } from './CombosPage';

const combos: ComboForm[] = [
  { name: 'fast', targets: [{ target: 'oa/gpt-4o-mini' }] },
  { name: 'smart', targets: [{ target: 'oa/gpt-4o' }] },
];

const provider: ProviderView = {
  id: 'oa',
  kind: 'openai',
  base_url: null,
  effective_base_url: 'https://api.openai.com/v1',
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: ['gpt-4o', 'gpt-4o-mini'],
  headers: {},
  credentials: [],
} as unknown as ProviderView;

// Keys without a pause between them: these forms are typed into a lot.
const userEvent = userEventBase.setup({ delay: null });

const saved: AliasesForm = { aliases: [{ match: 'claude-*', to: 'smart' }], default_route: null };

/** A server with two combos, one provider, and `aliases`; PUT /api/aliases answers `put`. */
function server(put: (call: ApiCall) => ApiReply) {
  return (call: ApiCall): ApiReply => {
    if (call.method === 'PUT' && call.path === '/api/aliases') return put(call);
    if (call.path === '/api/aliases') return ok(saved);
    if (call.path === '/api/combos') return ok(combos);
    if (call.path === '/api/providers') return ok([provider]);
    return { status: 404, body: null };
  };
}

describe('the aliases on the combos page', () => {
  it('lists the saved aliases, and saves edits, additions, removals and the default route in one PUT', async () => {
    const { transport } = renderWithServer(<CombosPage />, server((call) => ok(call.body)));
    const form = await screen.findByRole('form', { name: 'Aliases' });
    const aliases = within(form);
    expect(await aliases.findByLabelText('Alias 1 matches')).toHaveValue('claude-*');
    expect(aliases.getByLabelText('Alias 1 routes to')).toHaveValue('smart');

    await userEvent.click(aliases.getByRole('button', { name: 'Add alias' }));
    await userEvent.type(aliases.getByLabelText('Alias 2 matches'), 'claude-*haiku*');
    await userEvent.type(aliases.getByLabelText('Alias 2 routes to'), 'fast');
    await userEvent.click(aliases.getByRole('button', { name: 'Add alias' }));
    await userEvent.type(aliases.getByLabelText('Alias 3 matches'), 'gpt-*');
    await userEvent.type(aliases.getByLabelText('Alias 3 routes to'), 'oa/gpt-4o');
    await userEvent.click(aliases.getByRole('button', { name: 'Remove alias 3' }));
    await userEvent.clear(aliases.getByLabelText('Alias 1 routes to'));
    await userEvent.type(aliases.getByLabelText('Alias 1 routes to'), 'oa/gpt-4o');
    const route = aliases.getByLabelText('Default route');
    expect(within(route).getAllByRole('option').map((o) => o.textContent)).toEqual([
      'None: such names get 404',
      'fast',
      'smart',
      'oa/gpt-4o',
      'oa/gpt-4o-mini',
    ]);
    await userEvent.selectOptions(route, 'smart');
    await userEvent.click(aliases.getByRole('button', { name: 'Save aliases' }));

    await aliases.findByText('Saved');
    expect(transport.callsTo('PUT', '/api/aliases').map((c) => c.body)).toEqual([
      {
        aliases: [
          { match: 'claude-*', to: 'oa/gpt-4o' },
          { match: 'claude-*haiku*', to: 'fast' },
        ],
        default_route: 'smart',
      },
    ]);
  }, 20_000);

  it('shows the server`s refusal at the field it names and keeps the draft', async () => {
    renderWithServer(
      <CombosPage />,
      server(() => ({
        status: 422,
        body: {
          error: {
            message: 'aliases[1].to: "nope" is neither a combo nor provider/model; combos: ["fast", "smart"]',
            type: 'invalid_request_error',
            code: 422,
            switchyard: { field: 'aliases[1].to' },
          },
        },
      })),
    );
    const aliases = within(await screen.findByRole('form', { name: 'Aliases' }));
    await aliases.findByLabelText('Alias 1 matches');
    await userEvent.click(aliases.getByRole('button', { name: 'Add alias' }));
    await userEvent.type(aliases.getByLabelText('Alias 2 matches'), 'claude-*haiku*');
    await userEvent.type(aliases.getByLabelText('Alias 2 routes to'), 'nope');
    await userEvent.click(aliases.getByRole('button', { name: 'Save aliases' }));

    const field = aliases.getByLabelText('Alias 2 routes to');
    expect(await aliases.findByRole('alert')).toHaveTextContent('"nope" is neither a combo nor provider/model');
    expect(field).toHaveAttribute('aria-invalid', 'true');
    expect(field).toHaveValue('nope');
    expect(aliases.getByLabelText('Alias 1 routes to')).not.toHaveAttribute('aria-invalid');
    expect(aliases.queryByText('Saved')).not.toBeInTheDocument();
  }, 20_000);

  it('refuses an empty or repeated pattern before asking the server', async () => {
    const { transport } = renderWithServer(<CombosPage />, server((call) => ok(call.body)));
    const aliases = within(await screen.findByRole('form', { name: 'Aliases' }));
    await aliases.findByLabelText('Alias 1 matches');
    await userEvent.click(aliases.getByRole('button', { name: 'Add alias' }));
    await userEvent.type(aliases.getByLabelText('Alias 2 matches'), 'claude-*');
    await userEvent.type(aliases.getByLabelText('Alias 2 routes to'), 'fast');
    await userEvent.click(aliases.getByRole('button', { name: 'Add alias' }));
    await userEvent.click(aliases.getByRole('button', { name: 'Save aliases' }));

    expect(aliases.getByLabelText('Alias 2 matches')).toHaveAttribute('aria-invalid', 'true');
    expect(aliases.getByText('Same as alias 1')).toBeInTheDocument();
    expect(aliases.getByText('Write a model name or a pattern with *')).toBeInTheDocument();
    expect(transport.callsTo('PUT', '/api/aliases')).toHaveLength(0);
  }, 20_000);
});

describe('the combo cards', () => {
  it('say per target whether it can continue a broken answer, by its model fact or its kind', async () => {
    const anthropic = { ...provider, id: 'an', kind: 'anthropic', models: ['claude-x'] } as unknown as ProviderView;
    const deepseek = { ...provider, id: 'ds', models: [{ id: 'deepseek-chat', continuation: 'prefix' }] } as unknown as ProviderView;
    const mixed: ComboForm[] = [{ name: 'mixed', targets: [{ target: 'oa/gpt-4o' }, { target: 'an/claude-x' }, { target: 'ds/deepseek-chat' }] }];
    renderWithServer(<CombosPage />, (call: ApiCall): ApiReply => {
      if (call.path === '/api/aliases') return ok(saved);
      if (call.path === '/api/combos') return ok(mixed);
      if (call.path === '/api/providers') return ok([provider, anthropic, deepseek]);
      return { status: 404, body: null };
    });
    const card = within(await screen.findByRole('article', { name: 'Combo mixed' }));
    const rows = await card.findAllByRole('listitem');
    expect(rows[0]).toHaveTextContent('no continuation');
    expect(rows[1]).toHaveTextContent('continues by assistant prefill');
    expect(rows[2]).toHaveTextContent('continues by prefix: true');
  });
});

describe('Try it with auto', () => {
  it('offers auto and its presets and shows why the winner won', async () => {
    const ranked = {
      target: 'oa/gpt-4o-mini',
      credential: 'k1',
      event: 'ranked' as const,
      rank: 1,
      preset: 'auto:cheap',
      score: '0.812',
      factors: [{ name: 'price', value: '0.950', weight: '6' }],
      margin: '0.120',
      decision: 'auto:cheap oa/gpt-4o-mini score=0.812 margin=0.120 next=oa/gpt-4o',
    };
    const tried: ApiCall[] = [];
    renderWithServer(<CombosPage />, (call) => {
      if (call.method === 'POST' && call.path === '/api/try') {
        tried.push(call);
        return ok({ status: 200, answer: 'Hello.', served_by: 'oa/gpt-4o-mini', attempts: 1, latency_ms: 3, trace: [ranked], error: null });
      }
      return server(() => ok(saved))(call);
    });
    const select = await screen.findByLabelText('Model');
    expect(within(select).getByRole('option', { name: 'auto:cheap' })).toBeInTheDocument();
    await userEvent.selectOptions(select, 'auto:cheap');
    await userEvent.click(screen.getByRole('button', { name: 'Send' }));
    expect(await screen.findByTestId('try-decision')).toHaveTextContent('Why this one: auto:cheap oa/gpt-4o-mini score=0.812');
    expect(screen.getByTestId('ranked-1')).toHaveTextContent('price 0.950 × 6');
    expect(tried[0]?.body).toMatchObject({ model: 'auto:cheap' });
  });
});
