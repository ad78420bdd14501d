import { describe, expect, it } from 'vitest';
import type { FoundServer } from '../bindings/FoundServer';
import type { LocalServers } from '../bindings/LocalServers';
import { groq, lmStudio, ollama, openai } from '../test/catalogueFixtures';
import {
  badgeHue,
  filterCatalogue,
  foundServers,
  freeProviderId,
  initials,
  lastTests,
  localProvider,
  mergeModels,
  modelSummary,
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

  it('keeps what a look at this machine found, and makes each the provider of its preset', () => {
    const found: FoundServer = { server: 'ollama', preset: 'ollama', base_url: 'http://localhost:11434/v1', models: ['a', 'b'], providers: [] };
    const look: LocalServers = {
      elapsed_ms: 300,
      probes: [
        { probed: 'ollama', port: 11434, elapsed_ms: 2, answer: { status: 'found', ...found } },
        { probed: 'vllm', port: 8000, elapsed_ms: 300, answer: { status: 'timed_out' } },
      ],
    };
    expect(foundServers(look)).toEqual([{ port: 11434, found: { status: 'found', ...found } }]);
    expect(localProvider(ollama, found, [])).toEqual({ id: 'ollama', preset: 'ollama', models: ['a', 'b'] });
    expect(localProvider(ollama, { base_url: 'http://127.0.0.1:5001/v1', models: [] }, [{ id: 'ollama' }])).toEqual({
      id: 'ollama-2',
      preset: 'ollama',
      base_url: 'http://127.0.0.1:5001/v1',
    });
    expect(modelSummary(['a', 'b'])).toBe('a, b');
    expect(modelSummary(['a', 'b', 'c', 'd', 'e', 'f'])).toBe('a, b, c, d and 2 more');
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
