import { useId, useState, type ButtonHTMLAttributes, type InputHTMLAttributes, type ReactNode, type SelectHTMLAttributes } from 'react';
import { describe } from '../api/failure';

/** A button that shows progress: disabled with a spinner and `busyLabel` while `busy`. */
export function BusyButton({
  busy,
  busyLabel,
  children,
  disabled,
  ...rest
}: ButtonHTMLAttributes<HTMLButtonElement> & { busy: boolean; busyLabel: string }) {
  return (
    <button type="button" {...rest} disabled={busy || disabled} aria-busy={busy}>
      {busy ? (
        <>
          <span className="spinner" aria-hidden="true" /> {busyLabel}
        </>
      ) : (
        children
      )}
    </button>
  );
}

type FieldProps = {
  label: ReactNode;
  error?: string | null | undefined;
  hint?: ReactNode;
  id?: string;
};

/** A labelled input with its hint and its error, wired for screen readers. */
export function TextField({ label, error, hint, id, className, ...input }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  const auto = useId();
  const inputId = id ?? auto;
  const hintId = `${inputId}-hint`;
  const errorId = `${inputId}-error`;
  const described = [hint ? hintId : null, error ? errorId : null].filter(Boolean).join(' ') || undefined;
  return (
    <div className={`field${error ? ' field-invalid' : ''}${className ? ` ${className}` : ''}`}>
      <label htmlFor={inputId}>{label}</label>
      <input id={inputId} aria-invalid={error ? true : undefined} aria-describedby={described} {...input} />
      {hint ? (
        <div className="hint" id={hintId}>
          {hint}
        </div>
      ) : null}
      {error ? (
        <div className="error" id={errorId} role="alert">
          {error}
        </div>
      ) : null}
    </div>
  );
}

export function SelectField({
  label,
  error,
  hint,
  id,
  children,
  ...select
}: FieldProps & SelectHTMLAttributes<HTMLSelectElement> & { children: ReactNode }) {
  const auto = useId();
  const selectId = id ?? auto;
  return (
    <div className={`field${error ? ' field-invalid' : ''}`}>
      <label htmlFor={selectId}>{label}</label>
      <select id={selectId} aria-invalid={error ? true : undefined} aria-describedby={error ? `${selectId}-error` : undefined} {...select}>
        {children}
      </select>
      {hint ? <div className="hint">{hint}</div> : null}
      {error ? (
        <div className="error" id={`${selectId}-error`} role="alert">
          {error}
        </div>
      ) : null}
    </div>
  );
}

export function CheckField({
  label,
  error,
  hint,
  id,
  ...input
}: FieldProps & Omit<InputHTMLAttributes<HTMLInputElement>, 'type'>) {
  const auto = useId();
  const inputId = id ?? auto;
  return (
    <div className={`field field-check${error ? ' field-invalid' : ''}`}>
      <input id={inputId} type="checkbox" aria-invalid={error ? true : undefined} {...input} />
      <label htmlFor={inputId}>{label}</label>
      {hint ? <div className="hint">{hint}</div> : null}
      {error ? (
        <div className="error" role="alert">
          {error}
        </div>
      ) : null}
    </div>
  );
}

/** An error for the whole form or page. */
export function ErrorNote({ error, title }: { error: unknown; title?: string }) {
  if (error === null || error === undefined) return null;
  return (
    <div className="note note-error" role="alert">
      {title ? <strong>{title}: </strong> : null}
      {describe(error)}
    </div>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Clipboard refused (no permission, insecure context): select-and-copy fallback.
      const area = document.createElement('textarea');
      area.value = text;
      document.body.append(area);
      area.select();
      document.execCommand?.('copy');
      area.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 1500);
  };
  return (
    <button type="button" className="secondary small" onClick={() => void copy()} aria-label={`${label}: ${text}`}>
      {copied ? 'Copied' : label}
    </button>
  );
}

export function Badge({ tone, children }: { tone: 'ok' | 'warn' | 'bad' | 'muted'; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

/** A form's Save and Cancel buttons, and why the last save was refused. */
export function SaveActions({
  busy,
  label,
  error,
  onCancel,
}: {
  busy: boolean;
  label: string;
  error: unknown;
  onCancel: () => void;
}) {
  return (
    <>
      <div className="form-actions">
        <BusyButton type="submit" busy={busy} busyLabel="Saving…">
          {label}
        </BusyButton>
        <button type="button" className="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
      <ErrorNote error={error} title="Not saved" />
    </>
  );
}

/** A settings form's Save and Revert, what the last save said, and why one was refused. */
export function SaveRevert({
  label,
  busy,
  canSave,
  canRevert,
  onRevert,
  notice,
  error,
}: {
  label: string;
  busy: boolean;
  canSave: boolean;
  canRevert: boolean;
  onRevert: () => void;
  notice: string | null;
  error: unknown;
}) {
  return (
    <>
      <div className="form-actions">
        <BusyButton type="submit" busy={busy} busyLabel="Saving…" disabled={!canSave}>
          {label}
        </BusyButton>
        <button type="button" className="secondary" disabled={!canRevert} onClick={onRevert}>
          Revert
        </button>
        {notice ? (
          <span className="ok-text" role="status">
            {notice}
          </span>
        ) : null}
      </div>
      <ErrorNote error={error} title="Not saved" />
    </>
  );
}

/** Headline figures, each a large value over its label. */
export function Figures({ items }: { items: Array<{ label: string; value: ReactNode; testId: string; title?: string }> }) {
  return (
    <dl className="stats">
      {items.map((item) => (
        <div key={item.label}>
          <dt>{item.label}</dt>
          <dd data-testid={item.testId} title={item.title}>
            {item.value}
          </dd>
        </div>
      ))}
    </dl>
  );
}
