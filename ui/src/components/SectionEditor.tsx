import { useEffect, useState, type FormEvent } from 'react';
import type { SectionForms, SettingsSection } from '../api/client';
import { useAction, useApi, useResource } from '../app/context';
import { formatSetting } from '../format/duration';
import { placeError } from '../forms/fieldErrors';
import { parseWhole } from '../forms/lockoutForm';
import { isEmptyPatch, mergePatch } from '../forms/mergePatch';
import { getPath, setPath } from '../forms/paths';
import { CheckField, ErrorNote, SaveRevert, TextField } from './controls';

/** One input of a section: its dotted path in the section's form, and how to read it. */
export type FieldSpec = {
  path: string;
  label: string;
  /** `text` is sent as written; `optional-text` sends `null` when left empty. */
  kind: 'int' | 'optional-int' | 'bool' | 'text' | 'optional-text';
  ms?: boolean;
  hint?: string;
};
export type FieldGroup = { title?: string; fields: FieldSpec[] };

type Draft = Record<string, string | boolean>;

function draftOf(value: unknown, groups: FieldGroup[]): Draft {
  const draft: Draft = {};
  for (const field of groups.flatMap((g) => g.fields)) {
    const v = getPath(value, field.path);
    draft[field.path] = field.kind === 'bool' ? Boolean(v) : v === null || v === undefined ? '' : String(v);
  }
  return draft;
}

/**
 * A settings section as a form. Checks only that numbers are whole numbers; the ranges and
 * cross-field rules are the server's, and its error lands on the field it names. Saves a merge
 * patch of what changed.
 */
export function SectionEditor<S extends SettingsSection>({
  section,
  title,
  description,
  groups,
}: {
  section: S;
  title: string;
  description?: string;
  groups: FieldGroup[];
}) {
  const api = useApi();
  const loaded = useResource(() => api.section(section), [api, section]);
  const [saved, setSaved] = useState<SectionForms[S] | null>(null);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [serverErrors, setServerErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);
  const fields = groups.flatMap((g) => g.fields);
  const paths = fields.map((f) => f.path);

  useEffect(() => {
    if (loaded.data !== undefined && saved === null) {
      setSaved(loaded.data);
      setDraft(draftOf(loaded.data, groups));
    }
  }, [loaded.data, saved, groups]);

  const save = useAction(async (next: unknown) => {
    const patch = mergePatch(saved as Record<string, unknown>, next as Record<string, unknown>);
    if (isEmptyPatch(patch)) return;
    try {
      const result = await api.patchSection(section, patch);
      setSaved(result);
      setDraft(draftOf(result, groups));
      setNotice('Saved');
    } catch (error) {
      const placed = placeError(error, paths, section);
      setServerErrors(placed.fields);
      if (placed.form !== null) throw error;
    }
  });

  const headingId = `section-${section}`;
  if (saved === null || draft === null) {
    return (
      <section className="card" aria-labelledby={headingId}>
        <h2 id={headingId}>{title}</h2>
        <ErrorNote error={loaded.error} title="Cannot read the settings" />
        {loaded.error ? null : <p className="muted">Loading…</p>}
      </section>
    );
  }

  const clientErrors: Record<string, string> = {};
  let next: unknown = structuredClone(saved);
  for (const field of fields) {
    const raw = draft[field.path];
    if (field.kind === 'bool') {
      next = setPath(next, field.path, raw === true);
      continue;
    }
    const text = String(raw ?? '');
    if ((field.kind === 'optional-int' || field.kind === 'optional-text') && text.trim() === '') {
      next = setPath(next, field.path, null);
      continue;
    }
    if (field.kind === 'text' || field.kind === 'optional-text') {
      next = setPath(next, field.path, text.trim());
      continue;
    }
    const value = parseWhole(text);
    if (value === null) clientErrors[field.path] = 'Enter a whole number';
    else next = setPath(next, field.path, value);
  }
  const valid = Object.keys(clientErrors).length === 0;
  const unchanged = valid && isEmptyPatch(mergePatch(saved as Record<string, unknown>, next as Record<string, unknown>));
  const edit = (path: string, value: string | boolean) => {
    setDraft({ ...draft, [path]: value });
    setNotice(null);
    if (serverErrors[path]) {
      const { [path]: _gone, ...rest } = serverErrors;
      setServerErrors(rest);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (valid) void save.run(next);
  };

  return (
    <section className="card" aria-labelledby={headingId}>
      <h2 id={headingId}>{title}</h2>
      {description ? <p className="muted">{description}</p> : null}
      <form onSubmit={submit} noValidate aria-labelledby={headingId}>
        {groups.map((group, gi) => {
          const inputs = group.fields.map((field) => {
            const id = `${section}-${field.path.replace(/\./g, '-')}`;
            const error = clientErrors[field.path] ?? serverErrors[field.path] ?? null;
            if (field.kind === 'bool') {
              return (
                <CheckField key={field.path} id={id} label={field.label} hint={field.hint} checked={draft[field.path] === true} onChange={(e) => edit(field.path, e.target.checked)} error={error} />
              );
            }
            const text = String(draft[field.path] ?? '');
            const textual = field.kind === 'text' || field.kind === 'optional-text';
            const parsed = textual ? null : parseWhole(text);
            const hint = [field.hint, field.ms && parsed !== null ? `= ${formatSetting(parsed)}` : null].filter(Boolean).join(' · ');
            return (
              <TextField
                key={field.path}
                id={id}
                label={field.label}
                inputMode={textual ? undefined : 'numeric'}
                autoComplete={textual ? 'off' : undefined}
                value={text}
                placeholder={field.kind === 'optional-int' || field.kind === 'optional-text' ? 'default' : undefined}
                hint={hint || undefined}
                onChange={(e) => edit(field.path, e.target.value)}
                error={error}
              />
            );
          });
          return group.title ? (
            <fieldset key={gi} className="form-grid group">
              <legend>{group.title}</legend>
              {inputs}
            </fieldset>
          ) : (
            <div key={gi} className="form-grid">
              {inputs}
            </div>
          );
        })}
        <SaveRevert
          label={`Save ${title.toLowerCase()}`}
          busy={save.busy}
          canSave={valid && !unchanged}
          canRevert={!save.busy && !unchanged}
          onRevert={() => {
            setDraft(draftOf(saved, groups));
            setServerErrors({});
          }}
          notice={notice}
          error={save.error}
        />
      </form>
    </section>
  );
}
