//! JSON merge patches (RFC 7396) from an edit: only what changed goes to the server.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => equal(item, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) if (!equal(a[key], b[key])) return false;
    return true;
  }
  return false;
}

/**
 * The merge patch that turns `before` into `after`: changed members with their new value,
 * objects recursed into, arrays replaced whole (RFC 7396 has no array edits), removed members
 * as `null`. `undefined` in `after` means removed. Answers `{}` when nothing changed.
 */
export function mergePatch(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, Json> {
  const patch: Record<string, Json> = {};
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const old = before[key];
    const now = after[key];
    if (now === undefined) {
      if (old !== undefined && old !== null) patch[key] = null;
      continue;
    }
    if (equal(old, now)) continue;
    if (isObject(old) && isObject(now)) {
      const inner = mergePatch(old, now);
      if (Object.keys(inner).length > 0) patch[key] = inner;
    } else {
      patch[key] = now as Json;
    }
  }
  return patch;
}

/** Applies a merge patch (RFC 7396): what the server will do with it. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

export function isEmptyPatch(patch: Record<string, unknown>): boolean {
  return Object.keys(patch).length === 0;
}
