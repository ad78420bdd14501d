//! The provider form as typed (text areas for lists and headers) and its conversion to the
//! API's `ProviderForm`, or to a merge patch of an existing provider.
import type { BreakerProfile } from '../bindings/BreakerProfile';
import type { ModelEntry } from '../bindings/ModelEntry';
import type { ModelForm } from '../bindings/ModelForm';
import type { OpenAiApi } from '../bindings/OpenAiApi';
import type { ProviderForm } from '../bindings/ProviderForm';
import type { ProviderKind } from '../bindings/ProviderKind';
import type { ProviderView } from '../bindings/ProviderView';
import type { SelectionStrategy } from '../bindings/SelectionStrategy';
import { parseWhole } from './lockoutForm';
import { mergePatch } from './mergePatch';

export type ProviderDraft = {
  id: string;
  kind: ProviderKind;
  base_url: string;
  profile: '' | BreakerProfile;
  selection: SelectionStrategy['strategy'];
  sticky: string;
  /** `kind = openai` only; Chat Completions is the default. */
  api: OpenAiApi;
  passthrough: boolean;
  /** One model per line; `gpt-5-codex (responses)` gives that model its own API. */
  models: string;
  headers: string;
};

export const PROVIDER_FIELDS = ['id', 'kind', 'base_url', 'profile', 'selection', 'api', 'passthrough', 'models', 'headers'] as const;

/** A model entry as its table, whichever way it is spelled. */
export function modelOf(entry: ModelEntry): ModelForm {
  return typeof entry === 'string' ? { id: entry } : entry;
}

/** A model's continuation mechanism (RESILIENCE.md §10), or `false`. */
export type ContinuationMechanism = NonNullable<ModelForm['continuation']>;

/**
 * How `provider/model` continues a partial answer: the model's own fact, else its provider
 * kind's default (Anthropic's assistant prefill; none for the others), as the server decides.
 * `null` when the provider is not known.
 */
export function continuationOf(providers: readonly ProviderView[], target: string): ContinuationMechanism | null {
  const slash = target.indexOf('/');
  const provider = providers.find((p) => p.id === target.slice(0, slash));
  if (slash < 0 || provider === undefined) return null;
  const model = provider.models.map(modelOf).find((m) => m.id === target.slice(slash + 1));
  if (model?.continuation !== undefined) return model.continuation;
  return provider.kind === 'anthropic' ? 'anthropic' : false;
}

/** The entry as the server writes it: the plain id when it carries no fact. */
function entryOf(model: ModelForm): ModelEntry {
  const facts = Object.entries(model).filter(([key, value]) => key !== 'id' && value !== undefined && value !== null);
  return facts.length === 0 ? model.id : model;
}

/** One line of the models text area. */
function modelLine(entry: ModelEntry): string {
  const model = modelOf(entry);
  return model.api ? `${model.id} (${model.api})` : model.id;
}

const MODEL_LINE = /^(.*\S)\s+\((chat|responses)\)$/;

/**
 * The models text as entries. Facts the text does not show (those a later version adds) are
 * kept from `previous` for the ids that stay, so editing the list never loses them.
 */
function parseModels(text: string, previous: readonly ModelEntry[]): { models: ModelEntry[]; apiOutsideOpenai: boolean } {
  const known = new Map(previous.map((entry) => [modelOf(entry).id, modelOf(entry)]));
  let apiOutsideOpenai = false;
  const models = text
    .split(/[\n,]/)
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .map((line) => {
      const [, named, chosen] = MODEL_LINE.exec(line) ?? [];
      const id = named ?? line;
      const api = chosen as OpenAiApi | undefined;
      if (api) apiOutsideOpenai = true;
      const { api: _old, ...rest } = known.get(id) ?? { id };
      return entryOf(api ? { ...rest, id, api } : { ...rest, id });
    });
  return { models, apiOutsideOpenai };
}

/** The entries after adopting a discovered list: `names`, keeping what is known about each. */
export function adoptModels(current: readonly ModelEntry[], names: readonly string[]): ModelEntry[] {
  const known = new Map(current.map((entry) => [modelOf(entry).id, entry]));
  return names.map((name) => known.get(name) ?? name);
}

export const emptyProvider: ProviderDraft = {
  id: '',
  kind: 'openai',
  base_url: '',
  profile: '',
  selection: 'fill_first',
  sticky: '1',
  api: 'chat',
  passthrough: true,
  models: '',
  headers: '',
};

export function providerDraftOf(view: ProviderView): ProviderDraft {
  return {
    id: view.id,
    kind: view.kind,
    base_url: view.base_url ?? '',
    profile: view.profile ?? '',
    selection: view.selection.strategy,
    sticky: view.selection.strategy === 'round_robin' ? String(view.selection.sticky) : '1',
    api: view.api ?? 'chat',
    passthrough: view.passthrough,
    models: view.models.map(modelLine).join('\n'),
    headers: Object.entries(view.headers)
      .map(([name, value]) => `${name}: ${value}`)
      .join('\n'),
  };
}

/** The editable part of a provider, as the API's form (absent = default). */
function editable(view: ProviderView): Record<string, unknown> {
  return {
    base_url: view.base_url ?? undefined,
    profile: view.profile ?? undefined,
    selection: view.selection,
    // Written `api = "chat"` and left out mean the same: no patch for either.
    api: view.api === 'chat' ? undefined : (view.api ?? undefined),
    passthrough: view.passthrough ? undefined : false,
    models: view.models,
    headers: view.headers,
  };
}

/**
 * Checks the typed draft. `previous` is the provider's models as the server has them, whose
 * facts the text does not show and so are kept.
 */
export function checkProviderDraft(
  draft: ProviderDraft,
  creating: boolean,
  previous: readonly ModelEntry[] = [],
): { value: ProviderForm | null; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const id = draft.id.trim();
  if (creating) {
    if (id === '') errors.id = 'Name the provider';
    else if (!/^[A-Za-z0-9._-]{1,64}$/.test(id)) errors.id = '1 to 64 letters, digits, “.”, “_” or “-”';
  }
  const baseUrl = draft.base_url.trim();
  if (baseUrl !== '' && !/^https?:\/\/\S+$/.test(baseUrl)) errors.base_url = 'An http:// or https:// URL';
  let selection: SelectionStrategy;
  if (draft.selection === 'round_robin') {
    const sticky = parseWhole(draft.sticky);
    if (sticky === null || sticky < 1) errors.selection = 'Sticky must be a whole number of requests, at least 1';
    selection = { strategy: 'round_robin', sticky: sticky ?? 1 };
  } else {
    selection = { strategy: draft.selection };
  }
  const { models, apiOutsideOpenai } = parseModels(draft.models, previous);
  if (apiOutsideOpenai && draft.kind !== 'openai') {
    errors.models = 'Only OpenAI compatible providers choose an API per model: remove “(chat)” or “(responses)”';
  }
  const headers: Record<string, string> = {};
  draft.headers.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const colon = line.indexOf(':');
    const name = colon === -1 ? '' : line.slice(0, colon).trim();
    if (name === '' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      errors.headers = `Line ${i + 1}: write “Name: value”`;
      return;
    }
    headers[name] = line.slice(colon + 1).trim();
  });
  if (Object.keys(errors).length > 0) return { value: null, errors };
  const form: ProviderForm = { id, kind: draft.kind, selection, models, headers };
  if (baseUrl !== '') form.base_url = baseUrl;
  if (draft.profile !== '') form.profile = draft.profile;
  if (draft.kind === 'openai' && draft.api === 'responses') form.api = 'responses';
  if (!draft.passthrough) form.passthrough = false;
  return { value: form, errors };
}

/** The merge patch that turns `view` into `form` (only what the PATCH route accepts). */
export function providerPatch(view: ProviderView, form: ProviderForm): Record<string, unknown> {
  return mergePatch(editable(view), {
    base_url: form.base_url,
    profile: form.profile,
    selection: form.selection,
    api: form.api,
    passthrough: form.passthrough,
    models: form.models ?? [],
    headers: form.headers ?? {},
  });
}
