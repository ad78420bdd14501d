//! `switchyard doctor`: the findings of `GET /api/doctor`, and `--apply ID`,
//! which applies one with the digest of the evidence this very command just read, so a state
//! that changed in between is refused by the server (409) instead of acted on. The calls go
//! to the server running on the data directory, else to an app started here on it (see
//! [`Api`]); the findings, their words and the checks are the API's.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::providers::{Api, message};

/// Lists the findings (exit 1 when there are some, as `status` is 1 when something is red),
/// or applies `apply` (exit 0 once applied or, with `dry_run`, once it said what would change).
/// A confirmation (where requests and secrets may go) is asked for first, unless `yes`.
pub(super) async fn doctor(
    data_dir: &Path,
    apply: Option<String>,
    dry_run: bool,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    let api = Api::open(data_dir, false).await?;
    let done = match apply {
        None => list(&api).await,
        Some(id) => apply_one(&api, &id, dry_run, yes).await.map(|()| ExitCode::SUCCESS),
    };
    api.close().await;
    done
}

async fn findings(api: &Api) -> anyhow::Result<Vec<Value>> {
    let reply = api.call("GET", "/api/doctor", None).await?;
    anyhow::ensure!(reply.status == 200, "GET /api/doctor: {}", message(&reply));
    Ok(reply.body.as_array().cloned().unwrap_or_default())
}

#[expect(clippy::print_stdout, reason = "the findings are what this command prints")]
async fn list(api: &Api) -> anyhow::Result<ExitCode> {
    let all = findings(api).await?;
    let source = match api.running() {
        Some(server) => format!("the server on port {} (pid {})", server.port, server.pid),
        None => "the state file (no server is running on this data directory)".to_owned(),
    };
    if all.is_empty() {
        println!("nothing found: {source}");
        return Ok(ExitCode::SUCCESS);
    }
    let count = all.len();
    println!("{count} {}: {source}", if count == 1 { "finding" } else { "findings" });
    for finding in &all {
        print!("{}", finding_text(finding));
    }
    Ok(ExitCode::FAILURE)
}

/// One finding as the CLI prints it: the id to name it by, the title, a line per piece of
/// evidence, and what to do (the command that applies it, or where a person makes the fix).
fn finding_text(finding: &Value) -> String {
    let field = |name: &str| finding[name].as_str().unwrap_or("?");
    let id = field("id");
    let mut text = format!("\n{id}\n  {}\n", field("title"));
    for line in finding["evidence"].as_array().into_iter().flatten() {
        let _ = writeln!(text, "  seen: {}", line.as_str().unwrap_or("?"));
    }
    let action = &finding["action"];
    let says = action["says"].as_str().unwrap_or("?");
    match action["kind"].as_str() {
        Some("apply") => {
            let _ = writeln!(
                text,
                "  fix: {says}\n       switchyard doctor --apply {id}   (--dry-run: only say what would change)"
            );
        }
        _ => {
            let _ = writeln!(
                text,
                "  advice: {says} (in the app: {})",
                action["link"].as_str().unwrap_or("?")
            );
        }
    }
    text
}

#[expect(clippy::print_stdout, reason = "what was applied is what this command prints")]
async fn apply_one(api: &Api, id: &str, dry_run: bool, yes: bool) -> anyhow::Result<()> {
    let all = findings(api).await?;
    let Some(seen) = all.iter().find(|f| f["id"] == id) else {
        let ids: Vec<&str> = all.iter().filter_map(|f| f["id"].as_str()).collect();
        anyhow::bail!(
            "--apply: no finding \"{id}\" now (it may be fixed already); {}",
            if ids.is_empty() {
                "the doctor finds nothing".to_owned()
            } else {
                format!("there are: {}", ids.join(", "))
            }
        );
    };
    print!("{}", finding_text(seen));
    let change = &seen["action"]["change"];
    if change["change"] == "confirm" && !dry_run {
        println!("confirming sends, from now on:");
        for binding in change["bindings"].as_array().into_iter().flatten() {
            let what =
                binding["reference"].as_str().unwrap_or("requests (prompts and what they carry)");
            println!("  {what} -> {}", binding["destination"].as_str().unwrap_or("?"));
        }
        if !yes && !agreed("Send these requests and secrets to these hosts? [y/N] ")? {
            println!("nothing applied");
            return Ok(());
        }
    }
    let path = format!("/api/doctor/{}/apply", segment(id));
    let body = json!({ "digest": seen["digest"], "dry_run": dry_run });
    let reply = api.call("POST", &path, Some(body)).await?;
    match reply.status {
        200 if dry_run => {
            println!(
                "dry run, nothing changed: would {}",
                reply.body["says"].as_str().unwrap_or("?")
            );
        }
        200 => println!("applied: {}", reply.body["says"].as_str().unwrap_or("?")),
        409 => anyhow::bail!("{}: run `switchyard doctor` to see it as it is now", message(&reply)),
        _ => anyhow::bail!("--apply {id}: {}", message(&reply)),
    }
    Ok(())
}

/// Asks `question` on the terminal; true for yes.
#[expect(clippy::print_stdout, reason = "the question is asked where the answer is typed")]
fn agreed(question: &str) -> anyhow::Result<bool> {
    print!("{question}");
    std::io::Write::flush(&mut std::io::stdout())?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// `id` as one path segment: ids name their subject (`kind:provider/model@credential`), and a
/// `/` left as it is would split the route.
fn segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:@".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_becomes_one_path_segment_with_its_slashes_encoded() {
        assert_eq!(
            segment("stale_bench:oa/gpt-4o mini@oa-1"),
            "stale_bench:oa%2Fgpt-4o%20mini@oa-1"
        );
    }

    #[test]
    fn a_finding_prints_its_id_evidence_and_the_command_that_applies_it_or_where_to_fix_it() {
        let apply = json!({
            "id": "model_retired:oa/m", "title": "oa/m looks retired", "evidence": ["404 on k1", "404 on k2"],
            "digest": "d", "action": { "kind": "apply", "says": "remove m from oa", "change": {} }
        });
        let text = finding_text(&apply);
        assert!(
            text.starts_with(
                "\nmodel_retired:oa/m\n  oa/m looks retired\n  seen: 404 on k1\n  seen: 404 on k2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  fix: remove m from oa\n       switchyard doctor --apply model_retired:oa/m"
            ),
            "{text}"
        );
        let advice = json!({
            "id": "key_refused:oa/k1", "title": "t", "evidence": [], "digest": "d",
            "action": { "kind": "advice", "says": "replace the key", "link": "#/providers" }
        });
        assert!(
            finding_text(&advice)
                .ends_with("  advice: replace the key (in the app: #/providers)\n")
        );
    }
}
