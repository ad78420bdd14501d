//! The management token of the browser session (HTTP mode only).
const KEY = 'switchyard.managementToken';

export const session = {
  token: (): string | null => sessionStorage.getItem(KEY),
  save: (token: string) => sessionStorage.setItem(KEY, token),
  clear: () => sessionStorage.removeItem(KEY),
};
