import { render } from '@testing-library/react';
import type { ReactElement } from 'react';
import { ApiClient } from '../api/client';
import type { ApiCall } from '../bindings/ApiCall';
import type { ApiReply } from '../bindings/ApiReply';
import type { LiveHandlers, Transport } from '../api/transport';
import { ApiProvider } from '../app/context';

type Handler = (call: ApiCall) => ApiReply | Promise<ApiReply>;

/** A transport whose answers the test decides; it records every call. */
export class FakeTransport implements Transport {
  readonly mode = 'http' as const;
  readonly calls: ApiCall[] = [];
  live: LiveHandlers | null = null;

  constructor(public handler: Handler) {}

  async send(call: ApiCall): Promise<ApiReply> {
    this.calls.push(call);
    return this.handler(call);
  }

  subscribe(handlers: LiveHandlers): () => void {
    this.live = handlers;
    return () => {
      this.live = null;
    };
  }

  callsTo(method: string, pathPrefix: string): ApiCall[] {
    return this.calls.filter((c) => c.method === method && c.path.startsWith(pathPrefix));
  }
}

export const ok = (body: unknown): ApiReply => ({ status: 200, body });

export function renderWithServer(ui: ReactElement, handler: Handler) {
  const transport = new FakeTransport(handler);
  const client = new ApiClient(transport);
  const result = render(
    <ApiProvider client={client} throttleMs={0} requestThrottleMs={0}>
      {ui}
    </ApiProvider>,
  );
  return { transport, client, ...result };
}
