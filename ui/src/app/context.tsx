import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import type { ApiClient } from '../api/client';

const ApiContext = createContext<ApiClient | null>(null);
const LiveContext = createContext(0);
const RequestsContext = createContext(0);

/** The client every page talks through. */
export function useApi(): ApiClient {
  const client = useContext(ApiContext);
  if (!client) throw new Error('useApi outside <ApiProvider>');
  return client;
}

/**
 * A number that changes whenever the server says something changed (a health event or a
 * resync). Pages that show live state re-read when it changes. Bursts are coalesced into one
 * re-read per `throttleMs`.
 */
export function useLiveVersion(): number {
  return useContext(LiveContext);
}

/**
 * A number that changes when requests completed (and on a resync, which may have hidden some):
 * pages that show usage re-read when it changes. A busy proxy completes requests all the time,
 * so it changes at most once per `requestThrottleMs`, always after the last request.
 */
export function useRequestsVersion(): number {
  return useContext(RequestsContext);
}

/** Calls `fire` once, `ms` after the first of a burst of calls. */
function throttled(fire: () => void, ms: number) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return {
    bump() {
      if (timer !== undefined) return;
      timer = setTimeout(() => {
        timer = undefined;
        fire();
      }, ms);
    },
    cancel() {
      clearTimeout(timer);
    },
  };
}

export function ApiProvider({
  client,
  live = true,
  throttleMs = 250,
  requestThrottleMs = 1000,
  children,
}: {
  client: ApiClient;
  live?: boolean;
  throttleMs?: number;
  requestThrottleMs?: number;
  children: ReactNode;
}) {
  const [version, setVersion] = useState(0);
  const [requests, setRequests] = useState(0);
  useEffect(() => {
    if (!live) return;
    const health = throttled(() => setVersion((v) => v + 1), throttleMs);
    const done = throttled(() => setRequests((v) => v + 1), requestThrottleMs);
    const stop = client.subscribe({
      onEvent: health.bump,
      onResync: () => {
        health.bump();
        done.bump();
      },
      onRequest: done.bump,
    });
    return () => {
      stop();
      health.cancel();
      done.cancel();
    };
  }, [client, live, throttleMs, requestThrottleMs]);
  return (
    <ApiContext.Provider value={client}>
      <LiveContext.Provider value={version}>
        <RequestsContext.Provider value={requests}>{children}</RequestsContext.Provider>
      </LiveContext.Provider>
    </ApiContext.Provider>
  );
}

export type Resource<T> = {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  /** `Date.now()` when `data` arrived: countdowns subtract the time since. */
  readAt: number;
  reload: () => Promise<void>;
};

/**
 * Loads `load()` now, again whenever `deps` change, and on `reload()`. A slow answer never
 * overwrites a newer one.
 */
export function useResource<T>(load: () => Promise<T>, deps: readonly unknown[]): Resource<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean; readAt: number }>({
    data: undefined,
    error: null,
    loading: true,
    readAt: 0,
  });
  const generation = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    try {
      const data = await loadRef.current();
      if (mine === generation.current) setState({ data, error: null, loading: false, readAt: Date.now() });
    } catch (error) {
      if (mine === generation.current) setState((s) => ({ ...s, error, loading: false }));
    }
  }, []);
  useEffect(() => {
    void reload();
  }, deps);
  return { ...state, reload };
}

/** `Date.now()`, refreshed every `everyMs` while mounted. */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/** Runs an async action with a busy flag; the error stays until the next run. */
export function useAction<A extends unknown[], R>(action: (...args: A) => Promise<R>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const ref = useRef(action);
  ref.current = action;
  const run = useCallback(async (...args: A): Promise<R | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await ref.current(...args);
    } catch (e) {
      setError(e);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { run, busy, error, setError };
}
