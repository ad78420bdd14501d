import { screen, within } from '@testing-library/react';
import userEventBase from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { ImportSummary } from '../bindings/ImportSummary';
import { ok, renderWithServer } from '../test/fakeServer';
import { ConfigTransfer } from './ConfigTransfer';

const userEvent = userEventBase.setup({ delay: null });

const TOML = '[[providers]]\nid = "oa"\nkind = "openai"\nbase_url = "https://evil.example"\n';

const summary = (dry_run: boolean): ImportSummary => ({
  providers: 2,
  combos: 1,
  dry_run,
  pairs: [
    { reference: 'env:OPENAI_API_KEY', destination: 'https://evil.example:443', state: 'new', credentials: ['oa/main'] },
    { reference: 'env:ANTHROPIC_API_KEY', destination: 'https://api.anthropic.com:443', state: 'known', credentials: ['an/main'] },
  ],
  team: null,
  waiting: ['oa/main: environment variable OPENAI_API_KEY is not set (or not valid UTF-8)'],
});

/** A keyless provider at a new host, routed to by default, and a team database: no secret, every prompt. */
const keyless = (dry_run: boolean): ImportSummary => ({
  providers: 1,
  combos: 1,
  dry_run,
  pairs: [{ reference: null, destination: 'https://collector.example:443', state: 'new', credentials: ['collector/default'] }],
  team: { database_url: 'env:DATABASE_URL', instance: null, state: 'new' },
  waiting: [],
});

const refused: ApiReply = {
  status: 422,
  body: {
    error: {
      message: 'combos[0].strategy: "fastest" is not a strategy; use fill_first, round_robin or cost',
      type: 'invalid_request_error',
      code: 422,
      switchyard: { field: 'combos[0].strategy' },
    },
  },
};

function server(dryRun: (call: ApiCall) => ApiReply = (call) => ok(summary(call.path.includes('dry_run=true')))) {
  return (call: ApiCall): ApiReply => {
    if (call.method === 'POST' && call.path.startsWith('/api/config/import')) {
      return call.path.includes('dry_run=true') ? dryRun(call) : ok(summary(false));
    }
    if (call.path === '/api/config/export') return ok(TOML);
    return { status: 404, body: null };
  };
}

/** Imports made for real: every import call that is not a dry run. */
const realImports = (calls: ApiCall[]) =>
  calls.filter((c) => c.method === 'POST' && c.path.startsWith('/api/config/import') && !c.path.includes('dry_run=true'));

async function pickFile(text: string) {
  await userEvent.click(screen.getByRole('button', { name: 'Import config…' }));
  const dialog = within(screen.getByRole('dialog', { name: 'Import config' }));
  await userEvent.upload(dialog.getByLabelText('Config file'), new File([text], 'shared.toml', { type: 'application/toml' }));
  return dialog;
}

describe('the config import dialog', () => {
  it('checks a picked file with a dry run and lists every pair as new or known', async () => {
    const { transport } = renderWithServer(<ConfigTransfer />, server());
    const dialog = await pickFile(TOML);

    const table = within(await dialog.findByRole('table', { name: 'What it sends where' }));
    const dryRuns = transport.callsTo('POST', '/api/config/import');
    expect(dryRuns).toHaveLength(1);
    expect(dryRuns[0]?.path).toBe('/api/config/import?dry_run=true');
    expect(dryRuns[0]?.body).toBe(TOML);

    const rows = table.getAllByRole('row').slice(1);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent('env:OPENAI_API_KEYhttps://evil.example:443oa/mainnew');
    expect(rows[0]).toHaveClass('row-new');
    expect(rows[1]).toHaveTextContent('env:ANTHROPIC_API_KEYhttps://api.anthropic.com:443an/mainknown');
    expect(rows[1]).not.toHaveClass('row-new');
    expect(dialog.getByText(/would replace the config with 2 providers and 1 combo/)).toBeInTheDocument();
    expect(dialog.getByText(/New: this would send the secret/)).toHaveTextContent(
      'New: this would send the secret env:OPENAI_API_KEY to https://evil.example:443',
    );
    expect(dialog.getByTestId('import-waiting')).toHaveTextContent(
      'These credentials cannot read their secret yet; they are imported and serve once they can:oa/main: environment variable OPENAI_API_KEY is not set (or not valid UTF-8)',
    );
    expect(realImports(transport.calls)).toHaveLength(0);
  });

  it('lists a keyless destination and the team database: a file with no secret still says where prompts go', async () => {
    renderWithServer(<ConfigTransfer />, server(() => ok(keyless(true))));
    const dialog = await pickFile(TOML);

    const table = within(await dialog.findByRole('table', { name: 'What it sends where' }));
    const rows = table.getAllByRole('row').slice(1);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toHaveTextContent('Requests (prompts and what they carry)https://collector.example:443collector/defaultnew');
    expect(dialog.getByText(/New: this would send your prompts/)).toHaveTextContent('https://collector.example:443');
    expect(dialog.getByTestId('import-team')).toHaveTextContent('env:DATABASE_URL');
    expect(dialog.queryByText(/sends no secret/)).not.toBeInTheDocument();
    expect(dialog.getByRole('button', { name: 'Import and allow these destinations' })).toBeInTheDocument();
  });

  it('Import sends the file without confirm: new pairs stay benched', async () => {
    const { transport } = renderWithServer(<ConfigTransfer />, server());
    const dialog = await pickFile(TOML);
    await userEvent.click(await dialog.findByRole('button', { name: 'Import' }));

    expect(await screen.findByText(/benched \(/)).toBeInTheDocument();
    const imports = realImports(transport.calls);
    expect(imports).toHaveLength(1);
    expect(imports[0]?.path).toBe('/api/config/import');
    expect(imports[0]?.body).toBe(TOML);
  });

  it('Import and allow these destinations sends confirm=true', async () => {
    const { transport } = renderWithServer(<ConfigTransfer />, server());
    const dialog = await pickFile(TOML);
    await userEvent.click(await dialog.findByRole('button', { name: 'Import and allow these destinations' }));

    expect(await screen.findByText('Imported:')).toBeInTheDocument();
    const imports = realImports(transport.calls);
    expect(imports).toHaveLength(1);
    expect(imports[0]?.path).toBe('/api/config/import?confirm=true');
    expect(screen.queryByText(/benched \(/)).not.toBeInTheDocument();
  });

  it('offers no "allow" when every pair is known', async () => {
    const known = summary(true);
    known.pairs = known.pairs.filter((p) => p.state === 'known');
    renderWithServer(<ConfigTransfer />, server(() => ok(known)));
    const dialog = await pickFile(TOML);
    expect(await dialog.findByRole('button', { name: 'Import' })).toBeInTheDocument();
    expect(dialog.queryByRole('button', { name: 'Import and allow these destinations' })).not.toBeInTheDocument();
  });

  it('shows the server’s refusal with its field path and makes no import', async () => {
    const { transport } = renderWithServer(<ConfigTransfer />, server(() => refused));
    const dialog = await pickFile('[[combos]]\nstrategy = "fastest"\n');

    expect(await dialog.findByRole('alert')).toHaveTextContent('combos[0].strategy');
    expect(dialog.queryByRole('button', { name: 'Import' })).not.toBeInTheDocument();
    expect(dialog.queryByRole('table')).not.toBeInTheDocument();
    expect(realImports(transport.calls)).toHaveLength(0);
  });

  it('checks pasted text, and Cancel closes without importing', async () => {
    const { transport } = renderWithServer(<ConfigTransfer />, server());
    await userEvent.click(screen.getByRole('button', { name: 'Import config…' }));
    const dialog = within(screen.getByRole('dialog', { name: 'Import config' }));
    await userEvent.click(dialog.getByLabelText('Or paste the config'));
    await userEvent.paste(TOML);
    await userEvent.click(dialog.getByRole('button', { name: 'Check' }));
    await dialog.findByRole('table', { name: 'What it sends where' });
    expect(transport.callsTo('POST', '/api/config/import')[0]?.body).toBe(TOML);

    await userEvent.click(dialog.getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).not.toBeInTheDocument();
    expect(realImports(transport.calls)).toHaveLength(0);
  });
});

describe('config export', () => {
  afterEach(() => vi.restoreAllMocks());

  it('downloads the exported file and shows it for copying', async () => {
    // jsdom cannot follow the download link; record which file the click would save instead.
    const saved: string[] = [];
    vi.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      saved.push(this.download);
    });
    const { transport } = renderWithServer(<ConfigTransfer />, server());
    await userEvent.click(screen.getByRole('button', { name: 'Export config' }));
    expect(await screen.findByLabelText('Exported config')).toHaveValue(TOML);
    expect(transport.callsTo('GET', '/api/config/export')).toHaveLength(1);
    expect(saved).toEqual(['switchyard.toml']);
  });

  it('names a client`s login sent to a moved subscription host, which Import and allow does not confirm', async () => {
    const moved: ImportSummary = {
      ...summary(true),
      pairs: [{ reference: 'login:claude', destination: 'https://relay.example:443', state: 'new', credentials: ['sub/login'] }],
      waiting: [],
    };
    renderWithServer(<ConfigTransfer />, server(() => ok(moved)));
    const dialog = await pickFile(TOML);
    const table = within(await dialog.findByRole('table', { name: 'What it sends where' }));
    expect(table.getAllByRole('row')[1]).toHaveTextContent('Your Claude loginhttps://relay.example:443sub/loginnew');
    expect(dialog.getByTestId('import-login')).toHaveTextContent(
      "New: your Claude login will be sent to https://relay.example:443, not the subscription's own host. Only its provider's Confirm on the Providers page, which names it, sends it there: importing, with or without allowing destinations, does not.",
    );
  });
});
