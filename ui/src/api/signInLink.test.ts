import { describe, expect, it, vi } from 'vitest';
import { takeSignInCode } from './http';

describe('takeSignInCode', () => {
  it('takes the code out of the address bar, leaving no history entry with it', () => {
    const replaceState = vi.fn();
    const code = takeSignInCode(
      { hash: '#code=sy-code-00112233445566778899aabbccddeeff', pathname: '/', search: '' },
      { replaceState },
    );
    expect(code).toBe('sy-code-00112233445566778899aabbccddeeff');
    expect(replaceState).toHaveBeenCalledWith(null, '', '/');
  });

  it('leaves routes and anything else alone', () => {
    const replaceState = vi.fn();
    for (const hash of ['', '#/providers', '#code=', '#code=sy-ui-0011', '#code=sy-code-xyz', '#/x#code=sy-code-00']) {
      expect(takeSignInCode({ hash, pathname: '/', search: '' }, { replaceState })).toBeNull();
    }
    expect(replaceState).not.toHaveBeenCalled();
  });
});
