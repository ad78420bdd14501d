import { useEffect, useState } from 'react';

export type Route =
  | 'overview'
  | 'providers'
  | 'catalogue'
  | 'connect'
  | 'combos'
  | 'requests'
  | 'usage'
  | 'settings/resilience'
  | 'settings/lockouts'
  | 'settings/budgets'
  | 'settings/general';

export const ROUTES: Array<{ route: Route; label: string }> = [
  { route: 'overview', label: 'Overview' },
  { route: 'providers', label: 'Providers' },
  { route: 'catalogue', label: 'Catalogue' },
  { route: 'connect', label: 'Connect your tools' },
  { route: 'combos', label: 'Combos' },
  { route: 'requests', label: 'Requests' },
  { route: 'usage', label: 'Usage' },
  { route: 'settings/resilience', label: 'Resilience' },
  { route: 'settings/lockouts', label: 'Model Lockouts' },
  { route: 'settings/budgets', label: 'Budgets' },
  { route: 'settings/general', label: 'General' },
];

export function routeOf(hash: string): Route {
  const path = hash.replace(/^#\/?/, '');
  return ROUTES.find((r) => r.route === path)?.route ?? 'overview';
}

/** Hash routing: any static server can serve the UI, and reloads keep the page. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => routeOf(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(routeOf(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
