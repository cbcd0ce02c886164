//! `ksmith report RUN`: one self-contained HTML page for an agent run or a graph search (best
//! speedup so far against wall time, evaluations and tokens; the tree; the winner with its diff
//! and roofline fractions; the cost per role) and a terminal summary. Reads the store only, so
//! it works on a read-only store when the page goes elsewhere (`--out`).
//!
//! (`report.rs` next door is the table printer of `eval`/`bench`; this is the run report.)

use ksmith_results::run as data;
mod html;
mod plot;
mod tree;

use crate::term::one;
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use std::path::PathBuf;

/// `ksmith report` arguments.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// Run id (`ksmith runs` lists them): an agent run or a graph search.
    run: String,
    /// Where to write the page (default STORE/reports/RUN.html).
    #[arg(long, value_name = "FILE.html")]
    out: Option<PathBuf>,
}

/// A run id as a file name: anything but `[A-Za-z0-9._-]` becomes `_`.
fn file_stem(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // A name of dots alone would name a directory.
    if s.chars().all(|c| c == '.') {
        format!("run{s}")
    } else {
        s
    }
}

/// `ksmith report RUN [--out FILE.html]`.
/// What writing a run's report produced (the MCP server's `report` result).
#[derive(serde::Serialize)]
pub(crate) struct ReportWritten {
    /// The run.
    pub run: String,
    /// Where the page was written.
    pub path: String,
    /// The run's status as stored.
    pub status: String,
    /// Nodes (graph search) or snapshots (agent loop) drawn.
    pub nodes: usize,
    /// The winner's speedup, when a candidate passed.
    pub best_speedup: Option<f64>,
    /// LLM calls.
    pub calls: u64,
    /// Tokens in and out.
    pub tokens: u64,
    /// USD.
    pub cost: f64,
    /// Evaluations by the judge.
    pub evaluations: u64,
    /// Wall seconds of the run.
    pub wall_s: f64,
    /// What the report could not show.
    pub warnings: Vec<String>,
}

/// Writes the HTML report of `run` to `out` (default STORE/reports/RUN.html).
pub(crate) fn write_report(
    ctx: &Ctx,
    run: &str,
    out: Option<&std::path::Path>,
) -> Result<ReportWritten, Exit> {
    let (written, _) = write_page(ctx, run, out)?;
    Ok(written)
}

/// The report page written, with the data it drew.
fn write_page(
    ctx: &Ctx,
    run: &str,
    out: Option<&std::path::Path>,
) -> Result<(ReportWritten, data::ReportData), Exit> {
    let store = ctx.store_read()?;
    let d = data::load(&store, run).map_err(|e| match e {
        data::LoadError::UnknownRun(_) => input(e),
        data::LoadError::Store(_) => env_err(e),
    })?;
    let out = match out {
        Some(p) => p.to_path_buf(),
        None if store.is_read_only() => {
            return Err(input(anyhow!(
                "the store {} is read-only: write the report elsewhere with --out FILE.html",
                ctx.store_dir.display()
            )))
        }
        None => ctx
            .store_dir
            .join("reports")
            .join(format!("{}.html", file_stem(&d.run.id))),
    };
    let page = html::page(&d);
    if let Some(dir) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| env_err(anyhow!("--out: cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(&out, page)
        .map_err(|e| env_err(anyhow!("--out: cannot write {}: {e}", out.display())))?;
    let written = ReportWritten {
        run: d.run.id.clone(),
        path: out.display().to_string(),
        status: d.run.status.to_string(),
        nodes: d.nodes.len(),
        best_speedup: d.winner.as_ref().and_then(|w| d.nodes[w.node].speedup),
        calls: d.calls,
        tokens: d.tokens,
        cost: d.cost,
        evaluations: d.evaluations,
        wall_s: d.wall_s,
        warnings: d.warnings.clone(),
    };
    Ok((written, d))
}

pub(crate) fn cmd_report(ctx: &Ctx, args: &ReportArgs) -> Result<u8, Exit> {
    let (written, d) = write_page(ctx, &args.run, args.out.as_deref())?;
    let out = PathBuf::from(&written.path);
    let r = &d.run;
    say!(
        "run {} ({}, {}, {}): {}",
        one(&r.id),
        one(&r.task),
        d.kind.describe(),
        one(&r.model),
        r.status
    );
    match &d.winner {
        Some(w) => {
            let n = &d.nodes[w.node];
            let when = n.at_s.map(|t| format!(", {t:.1} s in")).unwrap_or_default();
            say!(
                "{} {:.2}x at {} (node {} of {}{when}){}",
                if d.finals.is_some() {
                    "winner (written)"
                } else {
                    "best so far (no final judgement recorded)"
                },
                n.speedup.unwrap_or(f64::NAN),
                one(&n.label),
                w.node + 1,
                d.nodes.len(),
                w.roofline
                    .map(|f| format!(", {:.1}% of the roofline", f * 100.0))
                    .unwrap_or_default()
            );
        }
        None => say!("no candidate passed ({} nodes)", d.nodes.len()),
    }
    if let Some(f) = &d.finals {
        if !f.summary.is_empty() {
            say!("decided: {}", one(&f.summary));
        }
    }
    say!(
        "{} calls, {} tokens, ${:.4}, {} evaluations, {:.1} s wall",
        d.calls,
        d.tokens,
        d.cost,
        d.evaluations,
        d.wall_s
    );
    for w in &d.warnings {
        note!("ksmith: report: {}", one(w));
    }
    say!("report: {}", out.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_become_safe_file_names() {
        assert_eq!(file_stem("run-20261202-ab12"), "run-20261202-ab12");
        assert_eq!(file_stem("../../etc/x"), ".._.._etc_x");
        assert_eq!(file_stem(".."), "run..");
    }
}
