//! Where a server error belongs on a form.
import { ApiFailure } from '../api/failure';

/**
 * The server names fields from the top of its input (`model_lockouts.error_codes[1]`,
 * `timeouts.first_byte_ms`, `secret`). A form names its inputs relative to what it edits
 * (`error_codes`, `first_byte_ms`). Strips the form's prefix and answers which of the form's
 * fields the error belongs to: the longest one that is the error's field or a parent of it.
 */
export function formFieldOf(serverField: string, fields: readonly string[], prefix = ''): string | null {
  let path = serverField;
  if (prefix !== '') {
    if (path === prefix) return null;
    if (path.startsWith(`${prefix}.`)) path = path.slice(prefix.length + 1);
  }
  let best: string | null = null;
  for (const field of fields) {
    const owns =
      path === field || path.startsWith(`${field}.`) || path.startsWith(`${field}[`);
    if (owns && (best === null || field.length > best.length)) best = field;
  }
  return best;
}

/** The message without the field name the server puts in front of it. */
export function problemOf(message: string, serverField: string | null): string {
  if (serverField && message.startsWith(`${serverField}:`)) {
    return message.slice(serverField.length + 1).trim();
  }
  return message;
}

/**
 * Splits an error into the one for a field (when the server named one of the form's fields)
 * and the one for the whole form (everything else).
 */
export function placeError(
  error: unknown,
  fields: readonly string[],
  prefix = '',
): { fields: Record<string, string>; form: string | null } {
  if (error instanceof ApiFailure) {
    const serverField = error.field;
    if (serverField) {
      const field = formFieldOf(serverField, fields, prefix);
      if (field) return { fields: { [field]: problemOf(error.message, serverField) }, form: null };
    }
    return { fields: {}, form: error.message };
  }
  return { fields: {}, form: error instanceof Error ? error.message : String(error) };
}
