import { describe, expect, it } from 'vitest';
import type { ProviderView } from '../bindings/ProviderView';
import { adoptModels, checkProviderDraft, emptyProvider, providerDraftOf, providerPatch } from './providerForm';

const view: ProviderView = {
  id: 'groq',
  preset: null,
  kind: 'openai',
  base_url: 'https://api.groq.com/openai/v1',
  effective_base_url: 'https://api.groq.com/openai/v1',
  profile: null,
  breaker: null,
  selection: { strategy: 'fill_first' },
  models: ['llama-3.3-70b'],
  headers: { 'X-Team': 'a' },
  credentials: [],
  unconfirmed: [],
  passthrough: true,
  api: null,
};

/** An OpenAI key with one model on Responses, written `api = "chat"`. */
const openai: ProviderView = {
  ...view,
  id: 'oa',
  base_url: null,
  effective_base_url: 'https://api.openai.com/v1',
  models: ['gpt-4o', { id: 'gpt-5-codex', api: 'responses' }],
  headers: {},
  api: 'chat',
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

  it('shows a model with its own API as “id (api)” and reads it back as a table', () => {
    const draft = providerDraftOf(openai);
    expect(draft.models).toBe('gpt-4o\ngpt-5-codex (responses)');
    expect(draft.api).toBe('chat');
    expect(checkProviderDraft(draft, false, openai.models).value?.models).toEqual(openai.models);
    expect(providerPatch(openai, checkProviderDraft(draft, false, openai.models).value!)).toEqual({});
  });

  it('patches a model’s API, the provider’s API and passthrough', () => {
    const draft = { ...providerDraftOf(openai), models: 'gpt-4o (responses)\ngpt-5-codex', api: 'responses' as const, passthrough: false };
    const form = checkProviderDraft(draft, false, openai.models).value!;
    expect(providerPatch(openai, form)).toEqual({
      api: 'responses',
      passthrough: false,
      models: [{ id: 'gpt-4o', api: 'responses' }, 'gpt-5-codex'],
    });
  });

  it('turns passthrough back on by removing it', () => {
    const off = { ...view, passthrough: false };
    const form = checkProviderDraft({ ...providerDraftOf(off), passthrough: true }, false).value!;
    expect(form.passthrough).toBeUndefined();
    expect(providerPatch(off, form)).toEqual({ passthrough: null });
  });

  it('sends api only for an OpenAI compatible provider, and refuses a model API elsewhere', () => {
    const anthropic = { ...emptyProvider, id: 'an', kind: 'anthropic' as const, api: 'responses' as const };
    expect(checkProviderDraft(anthropic, true).value).not.toHaveProperty('api');
    const checked = checkProviderDraft({ ...anthropic, models: 'claude (chat)' }, true);
    expect(checked.value).toBeNull();
    expect(Object.keys(checked.errors)).toEqual(['models']);
  });

  it('keeps what is known about a model when a discovered list is adopted', () => {
    expect(adoptModels(openai.models, ['gpt-5-codex', 'o3'])).toEqual([{ id: 'gpt-5-codex', api: 'responses' }, 'o3']);
  });
});
