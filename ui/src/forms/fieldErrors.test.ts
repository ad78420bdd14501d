import { describe, expect, it } from 'vitest';
import { ApiFailure } from '../api/failure';
import { formFieldOf, placeError, problemOf } from './fieldErrors';

const fields = ['error_codes', 'max_cooldown_ms', 'oauth', 'oauth.half_open_probes'];

describe('formFieldOf', () => {
  it('strips the section and finds the field', () => {
    expect(formFieldOf('model_lockouts.max_cooldown_ms', fields, 'model_lockouts')).toBe('max_cooldown_ms');
  });
  it('maps an indexed element to its list', () => {
    expect(formFieldOf('model_lockouts.error_codes[1]', fields, 'model_lockouts')).toBe('error_codes');
  });
  it('prefers the most specific field', () => {
    expect(formFieldOf('breaker_profiles.oauth.half_open_probes', fields, 'breaker_profiles')).toBe(
      'oauth.half_open_probes',
    );
    expect(formFieldOf('breaker_profiles.oauth.reset_timeout_ms', fields, 'breaker_profiles')).toBe('oauth');
  });
  it('does not match a field that merely shares a prefix', () => {
    expect(formFieldOf('max_cooldown_ms_extra', ['max_cooldown_ms'])).toBeNull();
  });
  it('answers null for a field the form does not have', () => {
    expect(formFieldOf('timeouts.idle_ms', fields, 'timeouts')).toBeNull();
  });
});

describe('problemOf', () => {
  it('drops the field name the message starts with', () => {
    expect(problemOf('timeouts.idle_ms: 5 is out of range', 'timeouts.idle_ms')).toBe('5 is out of range');
    expect(problemOf('something else', 'timeouts.idle_ms')).toBe('something else');
  });
});

describe('placeError', () => {
  const failure = (field: string | null, message: string) =>
    new ApiFailure(422, {
      error: { message, type: 'invalid_request_error', code: 422, switchyard: field ? { field } : null },
    });

  it('puts a named field error on the field', () => {
    const placed = placeError(
      failure('model_lockouts.max_cooldown_ms', 'model_lockouts.max_cooldown_ms: 500 is out of range; allowed 1000..=86400000'),
      fields,
      'model_lockouts',
    );
    expect(placed).toEqual({ fields: { max_cooldown_ms: '500 is out of range; allowed 1000..=86400000' }, form: null });
  });

  it('puts an error on no known field on the form', () => {
    expect(placeError(failure('name', 'name: taken'), fields)).toEqual({ fields: {}, form: 'name: taken' });
    expect(placeError(failure(null, 'boom'), fields)).toEqual({ fields: {}, form: 'boom' });
    expect(placeError(new Error('offline'), fields)).toEqual({ fields: {}, form: 'offline' });
  });
});

describe('ApiFailure', () => {
  it('keeps the server body and names its field', () => {
    const f = new ApiFailure(409, {
      error: { message: 'id: exists', type: 'conflict_error', code: 409, switchyard: { field: 'id' } },
    });
    expect(f.status).toBe(409);
    expect(f.field).toBe('id');
    expect(f.message).toBe('id: exists');
  });
  it('makes an ErrorBody from anything else', () => {
    const f = new ApiFailure(502, 'Bad gateway');
    expect(f.body.error).toEqual({ message: 'Bad gateway', type: 'api_error', code: 502, switchyard: null });
    expect(f.field).toBeNull();
    expect(new ApiFailure(500, null).message).toBe('The server answered 500');
  });
});
