import type { HealthEvent } from '../bindings/HealthEvent';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';

/**
 * What live updates tell the UI: one state change, "you missed some; re-read", or "requests
 * completed" (one call per burst of them: usage moved).
 */
export interface LiveHandlers {
  onEvent(event: HealthEvent): void;
  onResync(): void;
  onRequest(): void;
}

/**
 * How calls reach the management API: HTTP from a browser, or IPC inside the desktop app.
 * Both answer the same `ApiReply`; the client turns non-2xx into `ApiFailure`.
 */
export interface Transport {
  readonly mode: 'http' | 'ipc';
  send(call: ApiCall): Promise<ApiReply>;
  /** Starts live updates; the returned function stops them. */
  subscribe(handlers: LiveHandlers): () => void;
}
