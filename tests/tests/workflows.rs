//! The GitHub Actions workflows that are not part of the gate (.ci/run) still have a shape the
//! gate checks: `.github/workflows/latest-clients.yml` runs weekly (and by hand), runs
//! `tests/clients/run --latest` and keeps its log as an artifact even when the run fails.
//!
//! Read with `yaml-rust2` (YAML 1.2, as GitHub reads them: `on` is a key, not a boolean).

use std::path::PathBuf;

use yaml_rust2::{Yaml, YamlLoader};

/// What the tests ask of a node: a key's value, a string, a list, a map's entries.
trait Node {
    fn get(&self, key: &str) -> Option<&Yaml>;
    fn str(&self) -> Option<&str>;
    fn seq(&self) -> &[Yaml];
    fn entries(&self) -> Vec<(&str, &Yaml)>;
}

impl Node for Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        self.as_hash()?.get(&Yaml::String(key.to_owned()))
    }

    fn str(&self) -> Option<&str> {
        self.as_str()
    }

    fn seq(&self) -> &[Yaml] {
        self.as_vec().map_or(&[], Vec::as_slice)
    }

    fn entries(&self) -> Vec<(&str, &Yaml)> {
        self.as_hash()
            .map(|h| h.iter().filter_map(|(k, v)| Some((k.as_str()?, v))).collect())
            .unwrap_or_default()
    }
}

fn workflow(name: &str) -> Yaml {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.github/workflows").join(name);
    let source =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut documents =
        YamlLoader::load_from_str(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(documents.len(), 1, "{}: one document", path.display());
    documents.remove(0)
}

/// Every step of every job, with the job's name.
fn steps(workflow: &Yaml) -> Vec<(&str, &Yaml)> {
    let jobs = workflow.get("jobs").expect("a workflow has jobs");
    jobs.entries()
        .into_iter()
        .flat_map(|(job, body)| {
            body.get("steps").map(Node::seq).unwrap_or_default().iter().map(move |s| (job, s))
        })
        .collect()
}

/// The other workflow, read the same way: its bundle job uploads the installers.
#[test]
fn the_desktop_workflow_reads() {
    let desktop = workflow("desktop.yml");
    let uploads: Vec<_> = steps(&desktop)
        .into_iter()
        .filter(|(_, s)| {
            s.get("uses")
                .and_then(Node::str)
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
    let schedule = on.get("schedule").map(Node::seq).unwrap_or_default();
    assert!(!schedule.is_empty(), "no schedule trigger: {on:#?}");
    for entry in schedule {
        let cron = entry.get("cron").and_then(Node::str).unwrap_or_else(|| panic!("{entry:#?}"));
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
            .find(|(_, s)| s.get("run").and_then(Node::str).is_some_and(|r| r.contains(line)))
            .unwrap()
            .1;
        let shell = step.get("shell").and_then(Node::str).unwrap_or("");
        let run = step.get("run").and_then(Node::str).unwrap_or("");
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
                .and_then(Node::str)
                .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
        })
        .unwrap_or_else(|| panic!("job {job} uploads no artifact"));
    let paths = upload.get("with").and_then(|w| w.get("path")).and_then(Node::str).unwrap_or("");
    assert!(paths.lines().any(|p| p.trim() == log), "the artifact's paths {paths:?} miss {log}");
    assert!(
        upload.get("if").and_then(Node::str).is_some_and(|c| c.contains("always()")),
        "the log must be kept when the run fails: {upload:#?}"
    );
}
