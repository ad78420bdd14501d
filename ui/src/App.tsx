import { useCallback, useMemo, useState } from 'react';
import { ApiClient } from './api/client';
import { HttpTransport } from './api/http';
import { insideDesktop, IpcTransport } from './api/ipc';
import { ApiProvider, useApi, useResource } from './app/context';
import { ROUTES, useRoute, type Route } from './app/route';
import { session } from './app/session';
import { BudgetsPage } from './pages/BudgetsPage';
import { CataloguePage } from './pages/CataloguePage';
import { CombosPage } from './pages/CombosPage';
import { ConnectPage } from './pages/ConnectPage';
import { GeneralPage } from './pages/GeneralPage';
import { LockoutsPage } from './pages/LockoutsPage';
import { OverviewPage } from './pages/OverviewPage';
import { ProvidersPage } from './pages/ProvidersPage';
import { RequestsPage } from './pages/RequestsPage';
import { ResiliencePage } from './pages/ResiliencePage';
import { SignIn } from './pages/SignIn';
import { UsagePage } from './pages/UsagePage';

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

const FIRST_RUN_SKIPPED = 'switchyard.firstRunSkipped';

/**
 * The overview, or, while no provider exists, the first run: "Add your first provider". It
 * stays the first run until the person skips it (for this session) or finishes it.
 */
function Home() {
  const api = useApi();
  const providers = useResource(() => api.providers(), [api]);
  const [skipped, setSkipped] = useState(() => sessionStorage.getItem(FIRST_RUN_SKIPPED) === '1');
  // Decided once, on the first answer: the page must not switch under a person mid-flow
  // when the provider they are adding appears.
  const [firstRun, setFirstRun] = useState<boolean | null>(null);
  if (firstRun === null && providers.data !== undefined) setFirstRun(providers.data.length === 0);
  if (firstRun === null && providers.error !== null) setFirstRun(false);
  if (firstRun === null) return null;
  if (firstRun && !skipped) {
    return (
      <CataloguePage
        firstRun
        onSkip={() => {
          sessionStorage.setItem(FIRST_RUN_SKIPPED, '1');
          setSkipped(true);
        }}
      />
    );
  }
  return <OverviewPage />;
}

function Page({ route }: { route: Route }) {
  switch (route) {
    case 'overview':
      return <Home />;
    case 'providers':
      return <ProvidersPage />;
    case 'catalogue':
      return <CataloguePage />;
    case 'connect':
      return <ConnectPage />;
    case 'combos':
      return <CombosPage />;
    case 'requests':
      return <RequestsPage />;
    case 'usage':
      return <UsagePage />;
    case 'settings/resilience':
      return <ResiliencePage />;
    case 'settings/lockouts':
      return <LockoutsPage />;
    case 'settings/budgets':
      return <BudgetsPage />;
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
