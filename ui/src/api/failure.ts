//! One error type for every failed call, whatever the transport.
import type { ErrorBody } from '../bindings/ErrorBody';

function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const error = (value as { error: unknown }).error;
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { message?: unknown }).message === 'string'
  );
}

/**
 * A call the server answered with a non-2xx status. Always carries an `ErrorBody`: the
 * server's own when it sent one, else one made from the status and text, so callers never
 * branch on the shape.
 */
export class ApiFailure extends Error {
  readonly status: number;
  readonly body: ErrorBody;

  constructor(status: number, body: unknown) {
    const normalised: ErrorBody = isErrorBody(body)
      ? body
      : {
          error: {
            message:
              typeof body === 'string' && body.trim() !== ''
                ? body.trim()
                : `The server answered ${status}`,
            type: status === 401 ? 'authentication_error' : 'api_error',
            code: status,
            switchyard: null,
          },
        };
    super(normalised.error.message);
    this.name = 'ApiFailure';
    this.status = status;
    this.body = normalised;
  }

  /** The field the server blames (`model_lockouts.max_cooldown_ms`), when it names one. */
  get field(): string | null {
    const detail = this.body.error.switchyard;
    if (typeof detail === 'object' && detail !== null && !Array.isArray(detail)) {
      const field = (detail as Record<string, unknown>).field;
      if (typeof field === 'string' && field !== '') return field;
    }
    return null;
  }
}

/** A message for a person, whatever was thrown. */
export function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
