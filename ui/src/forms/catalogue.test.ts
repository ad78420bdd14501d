import { describe, expect, it } from 'vitest';
import { groq, lmStudio, openai } from '../test/catalogueFixtures';
import {
  badgeHue,
  filterCatalogue,
  freeProviderId,
  initials,
  lastTests,
  mergeModels,
  preselected,
  presetProvider,
  prices,
  suggestedCombo,
  tokens,
} from './catalogue';

describe('catalogue helpers', () => {
  it('makes initials from one or two words', () => {
    expect(initials('OpenRouter')).toBe('OP');
    expect(initials('LM Studio')).toBe('LS');
    expect(initials('xAI')).toBe('XA');
    expect(initials('  ')).toBe('?');
  });

  it('gives each preset a stable hue', () => {
    expect(badgeHue('groq')).toBe(badgeHue('groq'));
    expect(badgeHue('groq')).not.toBe(badgeHue('openai'));
    expect(badgeHue('groq')).toBeLessThan(360);
  });

  it('filters by every word, over id, name and model ids', () => {
    const all = [openai, groq, lmStudio];
    expect(filterCatalogue(all, '')).toHaveLength(3);
    expect(filterCatalogue(all, 'GROQ').map((p) => p.id)).toEqual(['groq']);
    expect(filterCatalogue(all, 'llama').map((p) => p.id)).toEqual(['groq']);
    expect(filterCatalogue(all, 'lm studio').map((p) => p.id)).toEqual(['lmstudio']);
    expect(filterCatalogue(all, 'openai mini').map((p) => p.id)).toEqual(['openai']);
    expect(filterCatalogue(all, 'nothing-like-this')).toEqual([]);
  });

  it('merges the discovered list with the facts, suggested first', () => {
    const merged = mergeModels(openai, ['o3', 'gpt-4o', 'brand-new']);
    expect(merged.map((m) => m.id)).toEqual(['gpt-4o', 'o3', 'brand-new']);
    expect(merged[0]!.facts?.context_window).toBe(128000);
    expect(merged[2]!.facts).toBeNull();
    expect(preselected(merged)).toEqual(['gpt-4o']);
  });

  it('falls back to the catalogue list without discovery, and to the first model without a suggestion', () => {
    expect(mergeModels(openai, null).map((m) => m.id)).toEqual(['gpt-4o', 'gpt-4o-mini', 'o3', 'text-embedding-3-small']);
    const unknown = mergeModels(openai, ['gpt-ok', 'other']);
    expect(preselected(unknown)).toEqual(['gpt-ok']);
    expect(preselected(mergeModels(lmStudio, []))).toEqual([]);
  });

  it('suggests a combo of the chosen models under a free name', () => {
    expect(suggestedCombo('openai', ['gpt-4o', 'o3'])).toEqual({
      name: 'main',
      strategy: 'priority',
      targets: [{ target: 'openai/gpt-4o' }, { target: 'openai/o3' }],
    });
    expect(suggestedCombo('openai', ['gpt-4o'], ['main', 'main-2']).name).toBe('main-3');
  });

  it('creates a preset provider with only what the user changed', () => {
    expect(presetProvider(openai, 'openai', 'https://api.openai.com/v1/')).toEqual({ id: 'openai', preset: 'openai' });
    expect(presetProvider(openai, 'work', 'http://127.0.0.1:9/v1', ['gpt-4o'])).toEqual({
      id: 'work',
      preset: 'openai',
      base_url: 'http://127.0.0.1:9/v1',
      models: ['gpt-4o'],
    });
    expect(freeProviderId('openai', [{ id: 'openai' }, { id: 'openai-2' }])).toBe('openai-3');
  });

  it('formats windows and prices', () => {
    expect(tokens(128000)).toBe('128k');
    expect(tokens(1_048_576)).toBe('1M');
    expect(tokens(undefined)).toBe('—');
    expect(prices(openai.models[0]!)).toBe('$2.50 / $10.00');
    expect(prices(null)).toBe('—');
  });

  it('remembers the last connection test per provider', () => {
    lastTests.record('openai', { ok: false, credential: 'main', latency_ms: 3, status: 401, models: null, error: 'bad key' }, 1000);
    expect(lastTests.all()).toEqual({ openai: { at: 1000, ok: false, status: 401, error: 'bad key' } });
  });
});
