//! The GitHub Actions workflows that are not part of the gate (.ci/run) still have a shape the
//! gate checks: `.github/workflows/latest-clients.yml` runs weekly (and by hand), runs
//! `tests/clients/run --latest` and keeps its log as an artifact even when the run fails.
//!
//! No YAML crate is in the lock file, so the workflows are read with the small block-YAML
//! reader below: maps, sequences, block scalars (`|`, `>`), plain and quoted scalars and
//! comments, which is all a workflow here uses. A file it cannot read fails the test.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Map(Vec<(String, Yaml)>),
    Seq(Vec<Yaml>),
    Str(String),
    Null,
}

impl Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }

    fn seq(&self) -> &[Yaml] {
        match self {
            Yaml::Seq(items) => items,
            _ => &[],
        }
    }

    fn map(&self) -> &[(String, Yaml)] {
        match self {
            Yaml::Map(entries) => entries,
            _ => &[],
        }
    }
}

/// A line: its indentation and its text without it (blank and comment-only lines are kept, as
/// block scalars need them; the parser skips them elsewhere).
struct Reader {
    lines: Vec<(usize, String)>,
    at: usize,
}

fn strip_comment(text: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && (i == 0 || bytes[i - 1] == b' ') => {
                return text[..i].trim_end();
            }
            _ => {}
        }
    }
    text.trim_end()
}

fn scalar(text: &str) -> Yaml {
    let text = strip_comment(text);
    if text.is_empty() || text == "~" || text == "null" {
        return Yaml::Null;
    }
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        return Yaml::Str(inner.replace("\\\"", "\"").replace("\\\\", "\\"));
    }
    if let Some(inner) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        return Yaml::Str(inner.replace("''", "'"));
    }
    Yaml::Str(text.to_owned())
}

/// `key: rest` or `key:` when `text` starts a mapping entry.
fn split_key(text: &str) -> Option<(String, &str)> {
    if text.starts_with(['"', '\'', '{', '[', '-', '|', '>']) {
        return None;
    }
    let end = text.find(": ").or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
    let key = &text[..end];
    if key.is_empty() || key.contains(" #") {
        return None;
    }
    Some((key.to_owned(), text[end + 1..].trim_start()))
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

impl Reader {
    fn new(source: &str) -> Self {
        let lines = source
            .lines()
            .map(|line| {
                let text = line.trim_start_matches(' ');
                (line.len() - text.len(), text.trim_end().to_owned())
            })
            .collect();
        Reader { lines, at: 0 }
    }

    /// The next line that carries content, without consuming it.
    fn peek(&mut self) -> Option<(usize, String)> {
        while let Some((indent, text)) = self.lines.get(self.at) {
            if text.is_empty() || text.starts_with('#') {
                self.at += 1;
            } else {
                return Some((*indent, text.clone()));
            }
        }
        None
    }

    fn node(&mut self, min_indent: usize) -> Result<Yaml, String> {
        match self.peek() {
            Some((indent, text)) if indent >= min_indent => {
                if is_item(&text) {
                    self.seq(indent)
                } else {
                    self.map(indent)
                }
            }
            _ => Ok(Yaml::Null),
        }
    }

    fn map(&mut self, indent: usize) -> Result<Yaml, String> {
        let mut entries = Vec::new();
        while let Some((at, text)) = self.peek() {
            if at < indent || (at == indent && is_item(&text)) {
                break;
            }
            if at > indent {
                return Err(format!("line {}: unexpected indentation", self.at + 1));
            }
            let (key, rest) = split_key(&text)
                .ok_or_else(|| format!("line {}: not `key: value`", self.at + 1))?;
            let rest = rest.to_owned();
            self.at += 1;
            let value = self.value(&rest, indent)?;
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }

    fn seq(&mut self, indent: usize) -> Result<Yaml, String> {
        let mut items = Vec::new();
        while let Some((at, text)) = self.peek() {
            if at != indent || !is_item(&text) {
                if at > indent {
                    return Err(format!("line {}: unexpected indentation", self.at + 1));
                }
                break;
            }
            let content = text[1..].trim_start().to_owned();
            if content.is_empty() {
                self.at += 1;
                items.push(self.node(indent + 1)?);
            } else if split_key(&content).is_some() {
                // `- key: value` opens a map whose keys line up with `key`.
                let inner = indent + (text.len() - content.len());
                self.lines[self.at] = (inner, content);
                items.push(self.map(inner)?);
            } else {
                self.at += 1;
                items.push(scalar(&content));
            }
        }
        Ok(Yaml::Seq(items))
    }

    /// The value after `key:` on a line indented `indent`.
    fn value(&mut self, rest: &str, indent: usize) -> Result<Yaml, String> {
        let rest = strip_comment(rest);
        if rest.starts_with('|') || rest.starts_with('>') {
            let folded = rest.starts_with('>');
            let mut block: Vec<(usize, String)> = Vec::new();
            while let Some((at, text)) = self.lines.get(self.at) {
                if !text.is_empty() && *at <= indent {
                    break;
                }
                block.push((*at, text.clone()));
                self.at += 1;
            }
            while block.last().is_some_and(|(_, t)| t.is_empty()) {
                block.pop();
            }
            let base = block.iter().filter(|(_, t)| !t.is_empty()).map(|(a, _)| *a).min();
            let lines: Vec<String> = block
                .iter()
                .map(|(at, text)| {
                    if text.is_empty() {
                        String::new()
                    } else {
                        " ".repeat(at - base.unwrap_or(0)) + text
                    }
                })
                .collect();
            let joined = lines.join(if folded { " " } else { "\n" });
            return Ok(Yaml::Str(if rest.ends_with('-') { joined } else { joined + "\n" }));
        }
        if rest.is_empty() {
            return match self.peek() {
                Some((at, text)) if at > indent || (at == indent && is_item(&text)) => {
                    self.node(at)
                }
                _ => Ok(Yaml::Null),
            };
        }
        Ok(scalar(rest))
    }
}

fn parse(source: &str) -> Result<Yaml, String> {
    let mut reader = Reader::new(source);
    let root = reader.node(0)?;
    match reader.peek() {
        None => Ok(root),
        Some(_) => Err(format!("line {}: left unread", reader.at + 1)),
    }
}

fn workflow(name: &str) -> Yaml {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows").join(name);
    let source =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every step of every job, with the job's name.
fn steps(workflow: &Yaml) -> Vec<(&str, &Yaml)> {
    let jobs = workflow.get("jobs").expect("a workflow has jobs");
    jobs.map()
        .iter()
        .flat_map(|(job, body)| {
            body.get("steps").map(Yaml::seq).unwrap_or_default().iter().map(|s| (job.as_str(), s))
        })
        .collect()
}

#[test]
fn the_reader_reads_what_workflows_use() {
    let yaml = parse(
        "# a comment\non:\n  push:\n    tags: [\"v*\"]\nlist:\n- a # trailing\n- key: 'it''s'\n  other: \"x # y\"\nblock: |\n  one\n\n    two\nnext: ~\n",
    )
    .unwrap();
    assert_eq!(
        yaml.get("on").and_then(|o| o.get("push")).and_then(|p| p.get("tags")).and_then(Yaml::str),
        Some("[\"v*\"]")
    );
    let list = yaml.get("list").unwrap().seq();
    assert_eq!(list[0], Yaml::Str("a".into()));
    assert_eq!(list[1].get("key").and_then(Yaml::str), Some("it's"));
    assert_eq!(list[1].get("other").and_then(Yaml::str), Some("x # y"));
    assert_eq!(yaml.get("block").and_then(Yaml::str), Some("one\n\n  two\n"));
    assert_eq!(yaml.get("next"), Some(&Yaml::Null));
    assert!(parse("a: 1\n  b: 2\n").is_err());
}

/// The reader on the other workflow: its bundle job uploads the installers.
#[test]
fn the_desktop_workflow_reads() {
    let desktop = workflow("desktop.yml");
    let uploads: Vec<_> = steps(&desktop)
        .into_iter()
        .filter(|(_, s)| {
            s.get("uses")
                .and_then(Yaml::str)
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .collect();
    assert_eq!(uploads.len(), 1, "{desktop:#?}");
    assert_eq!(uploads[0].0, "bundle");
}

#[test]
fn latest_clients_runs_weekly_and_keeps_its_log() {
    let latest = workflow("latest-clients.yml");
    let on = latest.get("on").unwrap_or_else(|| panic!("no `on`: {latest:#?}"));

    // Weekly: one cron entry at a fixed minute and hour on one day of the week, every month.
    let schedule = on.get("schedule").map(Yaml::seq).unwrap_or_default();
    assert!(!schedule.is_empty(), "no schedule trigger: {on:#?}");
    for entry in schedule {
        let cron = entry.get("cron").and_then(Yaml::str).unwrap_or_else(|| panic!("{entry:#?}"));
        let fields: Vec<&str> = cron.split_whitespace().collect();
        assert_eq!(fields.len(), 5, "cron {cron:?}");
        assert!(fields[0].parse::<u8>().is_ok_and(|m| m < 60), "minute of {cron:?}");
        assert!(fields[1].parse::<u8>().is_ok_and(|h| h < 24), "hour of {cron:?}");
        assert_eq!(&fields[2..4], ["*", "*"], "day of month and month of {cron:?}");
        assert!(fields[4].parse::<u8>().is_ok_and(|d| d <= 7), "one weekday in {cron:?}");
    }
    assert!(on.get("workflow_dispatch").is_some(), "no workflow_dispatch: {on:#?}");

    // A step runs `tests/clients/run --latest` and writes what it prints to a file; with a
    // pipe, pipefail keeps the suite's failure the step's.
    let all = steps(&latest);
    let runs: Vec<(&str, &str)> = all
        .iter()
        .filter_map(|(job, s)| Some((*job, s.get("run")?.str()?)))
        .flat_map(|(job, run)| run.lines().map(move |line| (job, line.trim())))
        .filter(|(_, line)| line.starts_with("tests/clients/run --latest"))
        .collect();
    assert_eq!(runs.len(), 1, "one step runs tests/clients/run --latest: {all:#?}");
    let (job, line) = runs[0];
    let log = line
        .split_once("| tee ")
        .map(|(_, rest)| rest)
        .or_else(|| line.split_once("> ").map(|(_, rest)| rest))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line:?} keeps no log"));
    if line.contains("| tee ") {
        let step = all
            .iter()
            .find(|(_, s)| s.get("run").and_then(Yaml::str).is_some_and(|r| r.contains(line)))
            .unwrap()
            .1;
        let shell = step.get("shell").and_then(Yaml::str).unwrap_or("");
        let run = step.get("run").and_then(Yaml::str).unwrap_or("");
        assert!(
            shell == "bash" || run.contains("set -o pipefail") || run.contains("set -eo pipefail"),
            "a `| tee` without pipefail hides a failing run: {step:#?}"
        );
    }

    // The same job uploads that log, whatever the run's result.
    let upload = all
        .iter()
        .filter(|(j, _)| *j == job)
        .map(|(_, s)| s)
        .find(|s| {
            s.get("uses")
                .and_then(Yaml::str)
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .unwrap_or_else(|| panic!("job {job} uploads no artifact"));
    let paths = upload.get("with").and_then(|w| w.get("path")).and_then(Yaml::str).unwrap_or("");
    assert!(paths.lines().any(|p| p.trim() == log), "the artifact's paths {paths:?} miss {log}");
    assert!(
        upload.get("if").and_then(Yaml::str).is_some_and(|c| c.contains("always()")),
        "the log must be kept when the run fails: {upload:#?}"
    );
}
