import { useId } from 'react';
import type { SecretView } from '../bindings/SecretView';

/**
 * A write-only secret. The server never sends a secret back, and this field never shows one:
 * it starts empty, says what is configured (`set …abcd`), and empty means "unchanged". Only
 * what the person types is ever sent.
 */
export function SecretField({
  label,
  current,
  value,
  onChange,
  error,
  id,
}: {
  label: string;
  current: SecretView | null;
  value: string;
  onChange: (value: string) => void;
  error?: string | null | undefined;
  id?: string;
}) {
  const auto = useId();
  const inputId = id ?? auto;
  const status = current === null ? null : current.set ? `set ${current.hint ?? ''}`.trim() : 'not set';
  const placeholder = current?.set ? 'Leave empty to keep the current key' : 'Paste the key';
  return (
    <div className={`field${error ? ' field-invalid' : ''}`}>
      <label htmlFor={inputId}>{label}</label>
      <input
        id={inputId}
        type="password"
        autoComplete="new-password"
        spellCheck={false}
        value={value}
        placeholder={placeholder}
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={`${inputId}-status`}
      />
      <div className="hint" id={`${inputId}-status`} data-testid="secret-status">
        {status ? <>Current: {status}{current?.reference ? ` (${current.reference})` : ''}. </> : null}
        Write-only: the key is never shown again{current?.set ? '; empty keeps it unchanged' : ''}.
      </div>
      {error ? (
        <div className="error" role="alert">
          {error}
        </div>
      ) : null}
    </div>
  );
}
