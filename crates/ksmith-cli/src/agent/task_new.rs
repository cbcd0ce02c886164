//! `ksmith task new REFERENCE.py --model P:M`: the test designer drafts a task from a bare
//! reference; it is written only once `ksmith validate` accepts it, and is frozen from then on.

use super::session::{Halt, Session};
use super::{FrozenJudge, RunOptions};
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_agents::{parse_task_draft, Budget, Role};
use ksmith_store::RunStatus;
use std::path::{Path, PathBuf};

/// Arguments of `ksmith task new`.
#[derive(clap::Args)]
pub(crate) struct TaskNewArgs {
    /// A JAX file defining the function (and, in a comment or docstring, example input shapes).
    pub reference: PathBuf,
    /// Model as `provider:model` (see `ksmith optimize --help`).
    #[arg(long)]
    pub model: String,
    /// Task directory to create (default: ./NAME, after the reference file's stem).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Drafts the designer may submit before giving up.
    #[arg(long, default_value_t = 3)]
    pub attempts: u32,
}

const FORMAT: &str = include_str!("../../../../docs/task-format.md");

/// The task part of the format document (the solution and language parts do not concern the
/// designer, and were 40% of its prompt).
fn task_format() -> &'static str {
    FORMAT
        .find("\n## Solution")
        .map_or(FORMAT, |end| &FORMAT[..end])
}

/// How large a workload should be so that a call takes about 1-50 ms on this machine.
fn target_size(hw: &ksmith_backend::hw::Hardware) -> String {
    let (bw, peak) = (hw.dram_floor_bandwidth(), hw.peak_floor_flops());
    format!(
        "about {:.0}-{:.0} MB of input and output for a memory-bound operation (at {:.1} GB/s), or {:.1}-{:.0} GFLOP for a compute-bound one (at the measured peak of {:.0} GFLOP/s; real kernels reach a fraction of it, so stay near the low end)",
        bw * 1e-3 / 1e6,
        bw * 50e-3 / 1e6,
        bw / 1e9,
        peak * 1e-3 / 1e9,
        peak * 50e-3 / 1e9,
        peak / 1e9
    )
}

/// Runs the test designer until a draft validates, or the attempts run out.
pub(crate) fn cmd_task_new(ctx: &Ctx, args: &TaskNewArgs) -> Result<u8, Exit> {
    let reference = std::fs::read_to_string(&args.reference)
        .map_err(|e| input(anyhow!("{}: cannot read: {e}", args.reference.display())))?;
    let file = args
        .reference
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .ok_or_else(|| input(anyhow!("{}: not a file", args.reference.display())))?;
    let stem = args
        .reference
        .file_stem()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| "task".into());
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(&stem));
    if out.join(ksmith_task::TASK_FILE_NAME).exists() {
        return Err(input(anyhow!(
            "{}: a task already exists there; tasks are frozen once written (choose another --out)",
            out.display()
        )));
    }
    let opts = RunOptions {
        from: std::path::absolute(&args.reference).unwrap_or(args.reference.clone()),
        budget: Budget {
            llm_calls: Some(args.attempts.into()),
            ..Budget::default()
        },
        fix_attempts: 0,
        knowledge: Vec::new(),
        prompts: None,
        tune_budget: 0,
        no_profile: true,
        judge: FrozenJudge {
            timeout: 30.0,
            seeds: 3,
            min_time_ms: 100,
        },
        out: out.clone(),
    };
    let hash = ksmith_task::content_hash(reference.as_bytes());
    // The run is listed under the task it drafts (its directory), not the reference file's name
    // (`reference.py` made every such run "reference").
    let name = std::path::absolute(&out)
        .ok()
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or(stem);
    let mut s = Session::create(
        ctx,
        &args.reference,
        &name,
        &hash,
        &args.model,
        ksmith_search::agent::state::RunMode::TaskNew,
        opts,
    )?;
    let result = design(ctx, &mut s, args, &reference, &file, &out);
    let (status, reason, code) = match &result {
        Ok(true) => (
            RunStatus::Finished,
            format!("task written to {}", out.display()),
            0,
        ),
        Ok(false) => (
            RunStatus::Stopped,
            format!("no valid draft in {} attempts", args.attempts),
            1,
        ),
        Err(e) => (RunStatus::Failed, crate::error_chain(&e.1), 1),
    };
    s.run.status = status;
    s.run.stop_reason = Some(reason.clone());
    s.run.out_dir = (code == 0).then(|| out.display().to_string());
    s.save()?;
    result?;
    say!("{reason} (run {})", s.run.id);
    Ok(code)
}

fn halt(h: Halt) -> Exit {
    match h {
        Halt::Failed(e) => env_err(e),
        Halt::Budget(l, m) => env_err(anyhow!("budget reached: {l} ({m})")),
    }
}

fn design(
    ctx: &Ctx,
    s: &mut Session,
    args: &TaskNewArgs,
    reference: &str,
    file: &str,
    out: &Path,
) -> Result<bool, Exit> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(env_err)?;
    let mut feedback = String::new();
    let mut judge = Some(ctx.judge(&crate::default_opts())?);
    let hw = judge
        .as_ref()
        .map(|j| j.hardware().clone())
        .expect("just set");
    for attempt in 1..=args.attempts {
        let vars = serde_json::json!({"reference_file": file, "reference": reference,
            "format": task_format(), "feedback": feedback,
            "machine": ksmith_search::agent::brief::machine_line(&hw), "target": target_size(&hw)});
        let prompt = s.prompts.render(Role::TestDesigner, &vars).map_err(input)?;
        let reply = s
            .call(Role::TestDesigner, &format!("draft {attempt}"), &prompt)
            .map_err(halt)?;
        let draft = match parse_task_draft(&reply) {
            Ok(d) => d,
            Err(e) => {
                feedback = e.0;
                note!("ksmith: draft {attempt} rejected: {feedback}");
                continue;
            }
        };
        // Validate in a scratch directory beside the destination, then move it into place.
        let scratch = tempfile::Builder::new()
            .prefix(".ksmith-draft-")
            .tempdir_in(parent)
            .map_err(env_err)?;
        std::fs::write(scratch.path().join(ksmith_task::TASK_FILE_NAME), &draft)
            .map_err(env_err)?;
        std::fs::write(scratch.path().join(file), reference).map_err(env_err)?;
        let problems = crate::validate_dir(ctx, &mut judge, scratch.path(), false)?;
        if problems.is_empty() {
            let kept = scratch.keep();
            std::fs::rename(&kept, out)
                .map_err(|e| env_err(anyhow!("moving the task to {}: {e}", out.display())))?;
            note!("ksmith: draft {attempt} validated");
            return Ok(true);
        }
        let scratch_name = scratch.path().display().to_string();
        feedback = problems
            .iter()
            .map(|p| p.replace(&scratch_name, "task"))
            .collect::<Vec<_>>()
            .join("\n");
        note!("ksmith: draft {attempt} failed validation:\n{feedback}");
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_designer_sees_the_task_format_only() {
        let f = task_format();
        assert!(f.contains("### task.toml") && f.contains("### What `ksmith validate` checks"));
        assert!(
            !f.contains("## Solution") && !f.contains("C kernel ABI"),
            "{f}"
        );
    }
}
