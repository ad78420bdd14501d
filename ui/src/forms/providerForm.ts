//! The provider form as typed (text areas for lists and headers) and its conversion to the
//! API's `ProviderForm`, or to a merge patch of an existing provider.
import type { BreakerProfile } from '../bindings/BreakerProfile';
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
  models: string;
  headers: string;
};

export const PROVIDER_FIELDS = ['id', 'kind', 'base_url', 'profile', 'selection', 'models', 'headers'] as const;

export const emptyProvider: ProviderDraft = {
  id: '',
  kind: 'openai',
  base_url: '',
  profile: '',
  selection: 'fill_first',
  sticky: '1',
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
    models: view.models.join('\n'),
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
    models: view.models,
    headers: view.headers,
  };
}

export function checkProviderDraft(draft: ProviderDraft, creating: boolean): { value: ProviderForm | null; errors: Record<string, string> } {
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
  const models = draft.models
    .split(/[\n,]/)
    .map((m) => m.trim())
    .filter((m) => m !== '');
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
  return { value: form, errors };
}

/** The merge patch that turns `view` into `form` (only what the PATCH route accepts). */
export function providerPatch(view: ProviderView, form: ProviderForm): Record<string, unknown> {
  return mergePatch(editable(view), {
    base_url: form.base_url,
    profile: form.profile,
    selection: form.selection,
    models: form.models ?? [],
    headers: form.headers ?? {},
  });
}
