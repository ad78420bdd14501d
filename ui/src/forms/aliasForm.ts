//! The aliases editor's rows as typed, and the `AliasesForm` they make.
import type { AliasesForm } from '../bindings/AliasesForm';

export type AliasDraft = { match: string; to: string };
export type AliasesDraft = { aliases: AliasDraft[]; default_route: string };

export const emptyAlias: AliasDraft = { match: '', to: '' };

export function aliasesDraftOf(form: AliasesForm): AliasesDraft {
  return {
    aliases: form.aliases.map((a) => ({ match: a.match, to: a.to })),
    default_route: form.default_route ?? '',
  };
}

/** The server's field names for one row: `aliases[2].to`. */
export const aliasField = (index: number, field: keyof AliasDraft) => `aliases[${index}].${field}`;

export function aliasFields(draft: AliasesDraft): string[] {
  const fields = ['aliases', 'default_route'];
  draft.aliases.forEach((_, i) => {
    fields.push(aliasField(i, 'match'), aliasField(i, 'to'), `aliases[${i}]`);
  });
  return fields;
}

/**
 * What can be told before asking the server: empty fields and repeated patterns. Whether a
 * route exists, and every other rule, is the server's to say (it names the field).
 */
export function checkAliasesDraft(draft: AliasesDraft): { value: AliasesForm | null; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  const seen = new Map<string, number>();
  const aliases = draft.aliases.map((row, i) => {
    const match = row.match.trim();
    const to = row.to.trim();
    if (match === '') errors[aliasField(i, 'match')] = 'Write a model name or a pattern with *';
    else if (seen.has(match)) errors[aliasField(i, 'match')] = `Same as alias ${(seen.get(match) ?? 0) + 1}`;
    else seen.set(match, i);
    if (to === '') errors[aliasField(i, 'to')] = 'Choose a combo or provider/model';
    return { match, to };
  });
  if (Object.keys(errors).length > 0) return { value: null, errors };
  const route = draft.default_route.trim();
  return { value: { aliases, default_route: route === '' ? null : route }, errors };
}
