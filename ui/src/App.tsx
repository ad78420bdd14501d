import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { ApiClient } from './api/client';
import { ApiFailure } from './api/failure';
import { HttpTransport, openSession, type SessionEnd } from './api/http';
import { insideDesktop, IpcTransport } from './api/ipc';
import { ApiProvider, useApi, useResource } from './app/context';
import { ROUTES, useRoute, type Route } from './app/route';
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

/** What the sign-in page says after a session ended by itself. */
const ENDED: Record<SessionEnd, string> = {
  refused: 'The server no longer accepts this session (it may have restarted). Sign in again.',
  lost: 'The connection to the server was lost (it may have stopped or restarted). Sign in again.',
};

/**
 * Picks the transport: IPC inside the desktop app (no token needed), else HTTP with a UI
 * session. The session token lives in this component's state only, never in storage: a
 * reload, a restart of the server or a dropped connection asks to sign in again.
 */
/** What the sign-in page says when a sign-in link did not work. */
const LINK_REFUSED =
  'This sign-in link was used already or has expired (a link opens one session, within minutes of being printed). Run `switchyard link` for a new one, or sign in with the management token.';

export function App({ signInCode = null }: { signInCode?: string | null } = {}) {
  const desktop = insideDesktop();
  const [session, setSession] = useState<string | null>(null);
  const [signedOut, setSignedOut] = useState<string | null>(null);
  // A sign-in link's code is exchanged once (a ref, not state: StrictMode runs effects twice).
  const [exchanging, setExchanging] = useState(signInCode !== null && !desktop);
  const exchange = useRef<Promise<string> | null>(null);
  useEffect(() => {
    if (signInCode === null || desktop) return;
    exchange.current ??= openSession(signInCode).then((opened) => opened.token);
    let live = true;
    exchange.current.then(
      (token) => {
        if (!live) return;
        setSession(token);
        setExchanging(false);
      },
      (error: unknown) => {
        if (!live) return;
        setSignedOut(
          error instanceof ApiFailure
            ? error.status === 401
              ? LINK_REFUSED
              : `The server answered ${error.status}: ${error.message}`
            : `Cannot reach the server: ${error instanceof Error ? error.message : String(error)}`,
        );
        setExchanging(false);
      },
    );
    return () => {
      live = false;
    };
  }, [signInCode, desktop]);

  const ended = useCallback((why: SessionEnd) => {
    setSession(null);
    setSignedOut(ENDED[why]);
  }, []);

  const transport = useMemo(() => {
    if (desktop) return new IpcTransport();
    if (session === null) return null;
    return new HttpTransport(session, { onEnded: ended });
  }, [desktop, session, ended]);
  const client = useMemo(() => (transport === null ? null : new ApiClient(transport)), [transport]);

  if (client === null && exchanging) {
    return (
      <main className="sign-in" id="main">
        <p role="status">Signing in…</p>
      </main>
    );
  }
  if (client === null) {
    return (
      <SignIn
        reason={signedOut}
        onSignedIn={(next) => {
          setSignedOut(null);
          setSession(next);
        }}
      />
    );
  }
  const signOut =
    transport instanceof HttpTransport
      ? () => {
          void transport.signOut();
          setSession(null);
          setSignedOut(null);
        }
      : null;
  return (
    <ApiProvider client={client}>
      <Shell onSignOut={signOut} />
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
