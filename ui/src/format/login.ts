/**
 * What a binding's reference is when it is a client's own login passed through (a `client`
 * credential to a host other than its subscription's own): `your Claude login`; `null` for any
 * other reference. The server spells them `login:claude` and `login:chatgpt`.
 */
export function loginName(reference: string): string | null {
  if (reference === 'login:claude') return 'your Claude login';
  if (reference === 'login:chatgpt') return 'your ChatGPT login';
  return reference.startsWith('login:') ? 'your login' : null;
}
