import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { BudgetSettings } from '../bindings/BudgetSettings';
import { applyMergePatch } from '../forms/mergePatch';
import { ok, renderWithServer } from '../test/fakeServer';
import { BudgetEditor } from './BudgetEditor';

const keys = [
  { id: 'key_1', name: 'editor', hint: '…abcd', created_at: 0, revoked_at: null },
  { id: 'key_2', name: 'agent', hint: '…efgh', created_at: 0, revoked_at: null },
  { id: 'key_3', name: 'gone', hint: '…ijkl', created_at: 0, revoked_at: 5 },
];

/** A server keeping `settings`, refusing a limit of 0 the way `BudgetSettings::validate` does. */
function server(initial: BudgetSettings) {
  let settings = initial;
  return (call: ApiCall): ApiReply => {
    if (call.path === '/api/keys') return ok(keys);
    if (call.method === 'GET') return ok(settings);
    const next = applyMergePatch(settings, call.body) as BudgetSettings;
    const zero = Object.entries({ '': next, ...Object.fromEntries(Object.entries(next.keys).map(([k, v]) => [`keys.${k}.`, v])) }).flatMap(([at, b]) =>
      (['daily', 'monthly'] as const).filter((p) => b[p]?.limit_usd === 0).map((p) => `budgets.${at}${p}.limit_usd`),
    );
    if (zero[0]) {
      const message = `${zero[0]}: 0 is out of range; allowed more than 0 and at most 1000000 (USD)`;
      return { status: 422, body: { error: { message, type: 'invalid_request_error', code: 422, switchyard: { field: zero[0] } } } };
    }
    settings = next;
    return ok(settings);
  };
}

const group = (name: string) => screen.getByRole('group', { name });

describe('the budgets editor', () => {
  it('sets an overall daily limit, enforced, as a merge patch', async () => {
    const { transport } = renderWithServer(<BudgetEditor />, server({ keys: {} }));
    const all = await screen.findByRole('group', { name: 'Every request' });
    const save = screen.getByRole('button', { name: 'Save budgets' });
    expect(save).toBeDisabled();
    const enforce = within(all).getByLabelText('Enforce the daily limit');
    expect(enforce).toBeDisabled(); // nothing to enforce without a limit
    await userEvent.type(within(all).getByLabelText('Daily limit (USD)'), '5');
    await userEvent.click(enforce);
    await userEvent.click(save);
    expect(await screen.findByText('Saved. Budgets apply from the next request.')).toBeInTheDocument();
    expect(transport.callsTo('PATCH', '/api/settings/budgets').map((c) => c.body)).toEqual([{ daily: { limit_usd: 5, enforce: true } }]);
  });

  it('adds budgets for a local key, offering the live keys, and removes a limit with null', async () => {
    const { transport } = renderWithServer(<BudgetEditor />, server({ monthly: { limit_usd: 100, enforce: false }, keys: {} }));
    await screen.findByRole('group', { name: 'Every request' });
    const options = [...document.querySelectorAll('datalist option')].map((o) => o.getAttribute('value'));
    expect(options).toEqual(['editor', 'agent']);

    await userEvent.type(screen.getByLabelText('Budgets for a local key'), 'editor');
    await userEvent.click(screen.getByRole('button', { name: 'Add key budgets' }));
    await userEvent.type(within(group('Key “editor”')).getByLabelText('Monthly limit (USD)'), '$20');
    await userEvent.clear(within(group('Every request')).getByLabelText('Monthly limit (USD)'));
    await userEvent.click(screen.getByRole('button', { name: 'Save budgets' }));
    await screen.findByText('Saved. Budgets apply from the next request.');
    expect(transport.callsTo('PATCH', '/api/settings/budgets').map((c) => c.body)).toEqual([
      { monthly: null, keys: { editor: { monthly: { limit_usd: 20, enforce: false } } } },
    ]);

    // A key's budgets go with Remove.
    await userEvent.click(screen.getByRole('button', { name: 'Remove the budgets of key editor' }));
    await userEvent.click(screen.getByRole('button', { name: 'Save budgets' }));
    await screen.findByText('Saved. Budgets apply from the next request.');
    expect(transport.callsTo('PATCH', '/api/settings/budgets').at(-1)?.body).toEqual({ keys: { editor: null } });
  });

  it('refuses a key twice and an amount that is not one, without a request', async () => {
    const { transport } = renderWithServer(<BudgetEditor />, server({ keys: { editor: { daily: { limit_usd: 1, enforce: true } } } }));
    await screen.findByRole('group', { name: 'Key “editor”' });
    await userEvent.click(screen.getByRole('button', { name: 'Add key budgets' }));
    expect(screen.getByLabelText('Budgets for a local key')).toHaveAccessibleDescription(/Name the key/);
    await userEvent.type(screen.getByLabelText('Budgets for a local key'), 'editor{Enter}');
    expect(screen.getByLabelText('Budgets for a local key')).toHaveAccessibleDescription('Key “editor” has budgets already: edit them above');

    const daily = within(group('Key “editor”')).getByLabelText('Daily limit (USD)');
    await userEvent.clear(daily);
    await userEvent.type(daily, 'ten');
    expect(daily).toHaveAttribute('aria-invalid', 'true');
    expect(daily).toHaveAccessibleDescription('Enter an amount in US dollars, e.g. 5 or 0.50');
    expect(screen.getByRole('button', { name: 'Save budgets' })).toBeDisabled();
    expect(transport.callsTo('PATCH', '/api/settings/budgets')).toHaveLength(0);
  });

  it('shows the server`s refusal at the field it names, and changes nothing', async () => {
    const { transport } = renderWithServer(<BudgetEditor />, server({ keys: { agent: { daily: { limit_usd: 2, enforce: false } } } }));
    const daily = within(await screen.findByRole('group', { name: 'Key “agent”' })).getByLabelText('Daily limit (USD)');
    await userEvent.clear(daily);
    await userEvent.type(daily, '0');
    await userEvent.click(screen.getByRole('button', { name: 'Save budgets' }));
    expect(await screen.findByText('0 is out of range; allowed more than 0 and at most 1000000 (USD)')).toBeInTheDocument();
    expect(daily).toHaveAttribute('aria-invalid', 'true');
    expect(screen.queryByText(/Not saved/)).not.toBeInTheDocument();
    expect(transport.callsTo('PATCH', '/api/settings/budgets')).toHaveLength(1);
    // Editing the field clears the server's word on it.
    await userEvent.type(daily, '.5');
    expect(daily).not.toHaveAttribute('aria-invalid');
  });
});
