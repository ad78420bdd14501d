import { useCallback, useMemo, useState } from 'react';
import { ApiClient } from './api/client';
import { HttpTransport } from './api/http';
import { insideDesktop, IpcTransport } from './api/ipc';
import { ApiProvider } from './app/context';
import { ROUTES, useRoute, type Route } from './app/route';
import { session } from './app/session';
import { CombosPage } from './pages/CombosPage';
import { GeneralPage } from './pages/GeneralPage';
import { LockoutsPage } from './pages/LockoutsPage';
import { OverviewPage } from './pages/OverviewPage';
import { ProvidersPage } from './pages/ProvidersPage';
import { RequestsPage } from './pages/RequestsPage';
import { ResiliencePage } from './pages/ResiliencePage';
import { SignIn } from './pages/SignIn';

/**
 * Picks the transport: IPC inside the desktop app (no token needed), else HTTP with the
 * management token the person pasted, kept for this browser session only.
 */
export function App() {
  const desktop = insideDesktop();
  const [token, setToken] = useState<string | null>(() => (desktop ? null : session.token()));
  const [signedOut, setSignedOut] = useState<string | null>(null);

  const signOut = useCallback((reason: string | null) => {
    session.clear();
    setToken(null);
    setSignedOut(reason);
  }, []);

  const client = useMemo(() => {
    if (desktop) return new ApiClient(new IpcTransport());
    if (token === null) return null;
    return new ApiClient(
      new HttpTransport(token, {
        onUnauthorized: () => signOut('The server no longer accepts that token. Sign in again.'),
      }),
    );
  }, [desktop, token, signOut]);

  if (client === null) {
    return (
      <SignIn
        reason={signedOut}
        onSignedIn={(next) => {
          session.save(next);
          setSignedOut(null);
          setToken(next);
        }}
      />
    );
  }
  return (
    <ApiProvider client={client}>
      <Shell onSignOut={desktop ? null : () => signOut(null)} />
    </ApiProvider>
  );
}

function Page({ route }: { route: Route }) {
  switch (route) {
    case 'overview':
      return <OverviewPage />;
    case 'providers':
      return <ProvidersPage />;
    case 'combos':
      return <CombosPage />;
    case 'requests':
      return <RequestsPage />;
    case 'settings/resilience':
      return <ResiliencePage />;
    case 'settings/lockouts':
      return <LockoutsPage />;
    case 'settings/general':
      return <GeneralPage />;
  }
}

function Shell({ onSignOut }: { onSignOut: (() => void) | null }) {
  const route = useRoute();
  const main = ROUTES.filter((r) => !r.route.startsWith('settings/'));
  const settings = ROUTES.filter((r) => r.route.startsWith('settings/'));
  const link = (r: (typeof ROUTES)[number]) => (
    <li key={r.route}>
      <a href={`#/${r.route}`} aria-current={route === r.route ? 'page' : undefined}>
        {r.label}
      </a>
    </li>
  );
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <aside className="sidebar">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            ⇄
          </span>{' '}
          Switchyard
        </div>
        <nav aria-label="Main">
          <ul>{main.map(link)}</ul>
          <div className="nav-group" id="nav-settings">
            Settings
          </div>
          <ul aria-labelledby="nav-settings">{settings.map(link)}</ul>
        </nav>
        {onSignOut ? (
          <button type="button" className="secondary small sign-out" onClick={onSignOut}>
            Sign out
          </button>
        ) : null}
      </aside>
      <main id="main" tabIndex={-1}>
        <Page route={route} />
      </main>
    </div>
  );
}
