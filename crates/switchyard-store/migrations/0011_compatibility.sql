-- min_reader_version: 0.1.0
--
-- The way back to an older build (docs/configuration.md, "Backups and older versions").
--
-- `compatibility` holds the oldest Switchyard that can run on this file: every migration from
-- this one on declares it on its first line, and the runner writes it here in the migration's
-- transaction. An older build that finds migrations it does not know runs on the file when it
-- is at least that version, and otherwise refuses to start. Migrations only add (tables,
-- columns with defaults, indexes), so raising the minimum is for a change an older build
-- would misread.
--
-- `settings.written_by` is the version of Switchyard that saved a section: an older build
-- shows a section a newer one wrote as read-only, naming the version to update to.

CREATE TABLE compatibility (
    id                  INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    min_reader_version  TEXT    NOT NULL
) STRICT;

ALTER TABLE settings ADD COLUMN written_by TEXT;
