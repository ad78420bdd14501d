import { describe, expect, it } from 'vitest';
import { applyMergePatch, mergePatch } from './mergePatch';

describe('mergePatch', () => {
  it('is empty when nothing changed', () => {
    expect(mergePatch({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 2] } })).toEqual({});
  });

  it('carries only the changed members', () => {
    expect(mergePatch({ a: 1, b: 2 }, { a: 1, b: 3 })).toEqual({ b: 3 });
  });

  it('recurses into objects', () => {
    const before = { oauth: { enabled: true, failure_threshold: 5 }, local: { enabled: true } };
    const after = { oauth: { enabled: true, failure_threshold: 7 }, local: { enabled: true } };
    expect(mergePatch(before, after)).toEqual({ oauth: { failure_threshold: 7 } });
  });

  it('replaces arrays whole', () => {
    expect(mergePatch({ codes: [404, 429] }, { codes: [429] })).toEqual({ codes: [429] });
  });

  it('removes members with null', () => {
    expect(mergePatch({ a: 1, b: 2 }, { a: 1 })).toEqual({ b: null });
    expect(mergePatch({ a: 1, b: 2 }, { a: 1, b: undefined })).toEqual({ b: null });
  });

  it('sets a member that was null', () => {
    expect(mergePatch({ degraded: null }, { degraded: 3 })).toEqual({ degraded: 3 });
  });

  it('round-trips: applying the patch to before gives after', () => {
    const before = { a: 1, b: { c: 2, d: [1] }, e: 'x' };
    const after = { a: 2, b: { c: 2, d: [1, 2] }, f: true };
    expect(applyMergePatch(before, mergePatch(before, after))).toEqual(after);
  });
});
