import { render, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import type { ProviderView } from '../bindings/ProviderView';
import { lastTests } from '../forms/catalogue';
import { groq, lmStudio, openai } from '../test/catalogueFixtures';
import { CatalogueList } from './CatalogueList';

const configured: ProviderView = {
  id: 'groq',
  preset: 'groq',
  kind: 'openai',
  base_url: null,
  effective_base_url: groq.base_url,
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: [],
  headers: {},
  credentials: [],
  unconfirmed: [],
  passthrough: true,
  api: null,
};

describe('CatalogueList', () => {
  it('searches the presets and shows initials, not logos', async () => {
    const onPick = vi.fn();
    render(<CatalogueList presets={[openai, groq, lmStudio]} providers={[]} breakers={[]} onPick={onPick} />);
    const list = screen.getByRole('list', { name: 'Catalogue' });
    expect(within(list).getAllByRole('listitem')).toHaveLength(3);
    expect(within(list).getByRole('listitem', { name: 'LM Studio' })).toHaveTextContent(/^LSLM Studio runs on this machine · models discovered/);
    expect(document.querySelector('img')).toBeNull();

    await userEvent.type(screen.getByLabelText('Search providers'), 'llama');
    expect(within(list).getAllByRole('listitem').map((li) => li.getAttribute('aria-label'))).toEqual(['Groq']);
    await userEvent.click(screen.getByRole('button', { name: 'Pick Groq' }));
    expect(onPick).toHaveBeenCalledWith(groq);

    await userEvent.clear(screen.getByLabelText('Search providers'));
    await userEvent.type(screen.getByLabelText('Search providers'), 'zzz');
    expect(screen.getByText('No provider in the catalogue matches “zzz”.')).toBeInTheDocument();
  });

  it('shows which presets are configured, their breaker and their last test', () => {
    lastTests.record('groq', { ok: false, credential: 'main', latency_ms: 5, status: 401, models: null, error: 'bad key' });
    render(
      <CatalogueList
        presets={[openai, groq]}
        providers={[configured]}
        breakers={[{ provider: 'groq', state: 'open', failures: 3, reopens: 0, last_fault: null, retry_in_ms: 1000, probing_elsewhere: false, recorded_by: null }]}
        onPick={() => {}}
      />,
    );
    const row = screen.getByRole('listitem', { name: 'Groq' });
    const health = within(row).getByRole('list', { name: 'Configured' });
    expect(health).toHaveTextContent('configured as groq');
    expect(health).toHaveTextContent('breaker open');
    expect(health).toHaveTextContent('last test failed (401)');
    expect(within(row).getByRole('button', { name: 'Pick Groq' })).toHaveTextContent('Add another');
    expect(within(screen.getByRole('listitem', { name: 'OpenAI' })).queryByRole('list', { name: 'Configured' })).toBeNull();
  });
});
