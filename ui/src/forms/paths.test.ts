import { describe, expect, it } from 'vitest';
import { getPath, setPath } from './paths';

describe('paths', () => {
  it('reads nested values', () => {
    expect(getPath({ a: { b: 3 } }, 'a.b')).toBe(3);
    expect(getPath({ a: null }, 'a.b')).toBeUndefined();
  });
  it('sets without touching the original', () => {
    const before = { a: { b: 1, c: 2 } };
    expect(setPath(before, 'a.b', 5)).toEqual({ a: { b: 5, c: 2 } });
    expect(before).toEqual({ a: { b: 1, c: 2 } });
    expect(setPath({}, 'x.y', true)).toEqual({ x: { y: true } });
  });
});
