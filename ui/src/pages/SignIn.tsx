import { useState, type FormEvent } from 'react';
import { HttpTransport } from '../api/http';
import { BusyButton, TextField } from '../components/controls';

/** The browser's way in: the management token, checked against the server before it is kept. */
export function SignIn({ onSignedIn, reason }: { onSignedIn: (token: string) => void; reason: string | null }) {
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
      const reply = await new HttpTransport(candidate).send({ method: 'GET', path: '/api/monitoring/health', body: null });
      if (reply.status === 401) setError('The server refused this token.');
      else if (reply.status !== 200) setError(`The server answered ${reply.status}.`);
      else onSignedIn(candidate);
    } catch (e) {
      setError(`Cannot reach the server: ${e instanceof Error ? e.message : String(e)}`);
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
              server was started with it. Kept for this browser tab only.
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
