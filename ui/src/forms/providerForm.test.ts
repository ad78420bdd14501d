import { describe, expect, it } from 'vitest';
import type { ProviderView } from '../bindings/ProviderView';
import { checkProviderDraft, emptyProvider, providerDraftOf, providerPatch } from './providerForm';

const view: ProviderView = {
  id: 'groq',
  kind: 'openai',
  base_url: 'https://api.groq.com/openai/v1',
  effective_base_url: 'https://api.groq.com/openai/v1',
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: ['llama-3.3-70b'],
  headers: { 'X-Team': 'a' },
  credentials: [],
};

describe('provider form', () => {
  it('turns the typed text into a ProviderForm', () => {
    const checked = checkProviderDraft(
      { ...emptyProvider, id: 'mock', base_url: 'http://127.0.0.1:9/v1', models: 'a, b\nc', headers: 'X-A: 1\n\nX-B:  two ', selection: 'round_robin', sticky: '3' },
      true,
    );
    expect(checked).toEqual({
      value: {
        id: 'mock',
        kind: 'openai',
        base_url: 'http://127.0.0.1:9/v1',
        selection: { strategy: 'round_robin', sticky: 3 },
        models: ['a', 'b', 'c'],
        headers: { 'X-A': '1', 'X-B': 'two' },
      },
      errors: {},
    });
  });

  it.each([
    [{ id: '' }, 'id'],
    [{ id: 'has space' }, 'id'],
    [{ id: 'ok', base_url: 'ftp://x' }, 'base_url'],
    [{ id: 'ok', headers: 'no colon here' }, 'headers'],
    [{ id: 'ok', selection: 'round_robin' as const, sticky: '0' }, 'selection'],
  ])('refuses %o on %s', (change, field) => {
    const checked = checkProviderDraft({ ...emptyProvider, ...change }, true);
    expect(checked.value).toBeNull();
    expect(Object.keys(checked.errors)).toEqual([field]);
  });

  it('patches only what changed, removing with null', () => {
    const draft = { ...providerDraftOf(view), base_url: '', headers: 'X-Team: b', models: 'llama-3.3-70b' };
    const form = checkProviderDraft(draft, false).value!;
    expect(providerPatch(view, form)).toEqual({ base_url: null, headers: { 'X-Team': 'b' } });
  });

  it('patches nothing when nothing changed', () => {
    const form = checkProviderDraft(providerDraftOf(view), false).value!;
    expect(providerPatch(view, form)).toEqual({});
  });
});
