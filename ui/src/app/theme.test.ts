import { afterEach, describe, expect, it } from 'vitest';
import { applyTheme } from './theme';

describe('applyTheme', () => {
  afterEach(() => {
    delete document.documentElement.dataset.theme;
  });

  it('sets the chosen palette on <html data-theme>', () => {
    applyTheme('dark');
    expect(document.documentElement.dataset.theme).toBe('dark');
    applyTheme('light');
    expect(document.documentElement.dataset.theme).toBe('light');
  });

  it('resolves system to a palette, light where the OS says nothing', () => {
    applyTheme('system');
    expect(document.documentElement.dataset.theme).toBe('light');
  });
});
