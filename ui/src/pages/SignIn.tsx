import { useState, type FormEvent } from 'react';
import { ApiFailure } from '../api/failure';
import { openSession } from '../api/http';
import { BusyButton, TextField } from '../components/controls';

/**
 * The browser's way in: the management token, exchanged for a session (`POST /api/session`)
 * and forgotten. `onSignedIn` gets the session token, never the management token.
 */
export function SignIn({ onSignedIn, reason }: { onSignedIn: (session: string) => void; reason: string | null }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const candidate = token.trim();
    if (candidate === '') {
      setError('Paste the management token');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const session = await openSession(candidate);
      setToken('');
      onSignedIn(session.token);
    } catch (e) {
      if (e instanceof ApiFailure) {
        setError(e.status === 401 ? 'The server refused this token.' : `The server answered ${e.status}: ${e.message}`);
      } else {
        setError(`Cannot reach the server: ${e instanceof Error ? e.message : String(e)}`);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="sign-in" id="main">
      <form className="card" onSubmit={(e) => void submit(e)} noValidate>
        <h1>
          <span className="brand-mark" aria-hidden="true">
            ⇄
          </span>{' '}
          Switchyard
        </h1>
        <p>Sign in to manage this Switchyard server.</p>
        <p className="hint">
          The quickest way in is the link <code>switchyard serve</code> printed when it started; <code>switchyard link</code>{' '}
          prints a new one.
        </p>
        {reason ? (
          <div className="note note-warn" role="status">
            {reason}
          </div>
        ) : null}
        <TextField
          label="Management token"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(e) => setToken(e.target.value)}
          error={error}
          hint={
            <>
              The contents of <code>management-token</code> in the data directory (for example{' '}
              <code>~/.local/share/switchyard/management-token</code>), or <code>SWITCHYARD_MANAGEMENT_TOKEN</code> if the
              server was started with it. It is exchanged for a session and not kept; the session ends
              when this tab is reloaded or closed, or the server restarts.
            </>
          }
        />
        <BusyButton type="submit" busy={busy} busyLabel="Checking…">
          Sign in
        </BusyButton>
      </form>
    </main>
  );
}
