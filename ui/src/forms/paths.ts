//! Dotted paths into plain JSON objects (`api_key.failure_threshold`).

export function getPath(value: unknown, path: string): unknown {
  let current = value;
  for (const part of path.split('.')) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

/** A copy of `value` with `path` set; missing objects on the way are created. */
export function setPath(value: unknown, path: string, next: unknown): unknown {
  const [head, ...rest] = path.split('.');
  const base = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  if (head === undefined) return value;
  return { ...base, [head]: rest.length === 0 ? next : setPath(base[head], rest.join('.'), next) };
}
