import { useEffect, useState } from 'react';

export type Theme = 'light' | 'dark' | 'system';
const KEY = 'switchyard.theme';

export function storedTheme(): Theme {
  const value = localStorage.getItem(KEY);
  return value === 'light' || value === 'dark' ? value : 'system';
}

/** The OS's preference (absent where there is no `matchMedia`, as in jsdom). */
const osDark = typeof window.matchMedia === 'function' ? window.matchMedia('(prefers-color-scheme: dark)') : undefined;

/**
 * Applies the theme to `<html data-theme>` as `light` or `dark`: `system` is resolved here from
 * the OS's preference, so the stylesheet has one dark palette, keyed on the attribute only.
 */
export function applyTheme(theme: Theme) {
  const dark = theme === 'dark' || (theme === 'system' && osDark?.matches === true);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
}

export function useTheme(): [Theme, (theme: Theme) => void] {
  const [theme, setTheme] = useState<Theme>(storedTheme);
  useEffect(() => {
    applyTheme(theme);
    if (theme !== 'system') {
      localStorage.setItem(KEY, theme);
      return undefined;
    }
    localStorage.removeItem(KEY);
    // Following the OS: follow it when it changes, too.
    const follow = () => applyTheme('system');
    osDark?.addEventListener('change', follow);
    return () => osDark?.removeEventListener('change', follow);
  }, [theme]);
  return [theme, setTheme];
}

/**
 * The theme in force (`light` or `dark`, from `<html data-theme>`), kept current: canvas
 * charts draw with the palette's colours and must redraw when it changes.
 */
export function useAppliedTheme(): string {
  const read = () => document.documentElement.dataset.theme ?? 'light';
  const [theme, setTheme] = useState(read);
  useEffect(() => {
    const observer = new MutationObserver(() => setTheme(read()));
    observer.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
    return () => observer.disconnect();
  }, []);
  return theme;
}
