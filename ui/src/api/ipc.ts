import { invoke } from '@tauri-apps/api/core';
import { listen } from '@tauri-apps/api/event';
import type { HealthEvent } from '../bindings/HealthEvent';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { LiveHandlers, Transport } from './transport';

/** Inside the desktop app: the shell forwards each call into the same router, in process. */
export class IpcTransport implements Transport {
  readonly mode = 'ipc' as const;

  send(call: ApiCall): Promise<ApiReply> {
    return invoke<ApiReply>('api', { call });
  }

  subscribe(handlers: LiveHandlers): () => void {
    let stopped = false;
    const unlisten: Array<() => void> = [];
    const keep = (stop: () => void) => {
      if (stopped) stop();
      else unlisten.push(stop);
    };
    listen<HealthEvent>('health', (event) => handlers.onEvent(event.payload))
      .then(keep)
      .catch(() => handlers.onResync());
    // Requests that completed, one event per burst (the shell coalesces them).
    listen('request', () => handlers.onRequest())
      .then(keep)
      .catch(() => handlers.onResync());
    return () => {
      stopped = true;
      for (const stop of unlisten.splice(0)) stop();
    };
  }
}

/** Whether the page runs inside the Tauri shell. */
export function insideDesktop(): boolean {
  return typeof window !== 'undefined' && '__TAURI_INTERNALS__' in window;
}

/** How to serve this app's config without the window: desktop only. */
export interface Headless {
  /** The line to paste into a terminal. */
  command: string;
  /** Whether the `switchyard` CLI is where the installers put it. */
  cli_found: boolean;
}

export const headlessCommand = (): Promise<Headless> => invoke<Headless>('headless_command');

/** Start at login: desktop only. */
export const autostart = {
  get: (): Promise<boolean> => invoke<boolean>('autostart_get'),
  set: (enabled: boolean): Promise<boolean> => invoke<boolean>('autostart_set', { enabled }),
};
