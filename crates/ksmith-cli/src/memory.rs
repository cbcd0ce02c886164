//! `ksmith memory`: list, show, prune and harvest the cross-run memory (what made kernels
//! faster in earlier runs; `ksmith_search::memory`). Listing and showing work on a read-only
//! store.

use crate::term::{continued, one};
use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use clap::{Args, Subcommand};
use ksmith_search::memory::{self, MemoryEntry, PruneRule, WinRateFloor};
use ksmith_task::OpClass;
use std::path::PathBuf;

/// `ksmith memory ...`.
#[derive(Subcommand)]
pub(crate) enum MemoryCmd {
    /// List memory entries (oldest first, or as a planner on a task would get them), with filters.
    List(ListArgs),
    /// Show one entry: where it came from, its gain, win rate and before/after excerpt.
    Show {
        /// Entry id (from `ksmith memory list`).
        id: i64,
        /// Print the entry as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete entries that are old or that rarely helped (a pruned entry is not harvested again).
    Prune(PruneArgs),
    /// Turn a finished run's improvements into entries (runs are harvested when they finish;
    /// harvesting again adds nothing).
    Harvest {
        /// Run id (agent run or search).
        run: String,
        /// Print {"improvements", "added": [entry...], "wins", "skipped"} on stdout.
        #[arg(long)]
        json: bool,
    },
}

/// `ksmith memory list`.
#[derive(Args)]
pub(crate) struct ListArgs {
    /// Only entries harvested from this task (its name).
    #[arg(long, value_name = "TASK")]
    task: Option<String>,
    /// Only entries of this operator class (elementwise, reduction, normalization, matmul,
    /// attention, convolution, scan, moe, fused, other).
    #[arg(long, value_name = "CLASS", value_parser = parse_op_class)]
    op_class: Option<OpClass>,
    /// What a planner on this task directory would be shown, most relevant first: entries
    /// from the task itself (same name or same tests) left out, ranked by operator class,
    /// device (--fingerprint), win rate and gain.
    #[arg(long = "for", value_name = "TASK_DIR", conflicts_with = "task")]
    for_task: Option<PathBuf>,
    /// With --for: the device's environment fingerprint (as `ksmith show ID --json` prints it
    /// under environment.fingerprint); without it, the device does not rank.
    #[arg(long, value_name = "FP", requires = "for_task")]
    fingerprint: Option<String>,
    /// With --for: how many entries the planner gets.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "for_task")]
    limit: usize,
    /// Print {"entries": [{"id", "task", "op_class", "gain", "excerpt", "shown", "wins",
    /// "win_rate", ...}]} on stdout.
    #[arg(long)]
    json: bool,
}

/// `ksmith memory prune`.
#[derive(Args)]
#[command(group = clap::ArgGroup::new("rule").required(true).multiple(true).args(["older_than", "min_win_rate"]))]
pub(crate) struct PruneArgs {
    /// Entries harvested more than DAYS days ago.
    #[arg(long, value_name = "DAYS", value_parser = parse_days)]
    older_than: Option<f64>,
    /// Entries whose win rate ((wins + 1) / (shown + 2)) is below X, once shown --min-shown times.
    #[arg(long, value_name = "X", value_parser = parse_rate)]
    min_win_rate: Option<f64>,
    /// Times an entry must have been shown before --min-win-rate judges it.
    #[arg(long, value_name = "N", default_value_t = 5, requires = "min_win_rate")]
    min_shown: u64,
    /// List what would be deleted, delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print {"dry_run", "pruned": [entry...]} on stdout.
    #[arg(long)]
    json: bool,
}

impl MemoryCmd {
    /// Whether the command writes the store (listing, showing and dry runs do not).
    pub(crate) fn writes_store(&self) -> bool {
        match self {
            MemoryCmd::List(_) | MemoryCmd::Show { .. } => false,
            MemoryCmd::Prune(a) => !a.dry_run,
            MemoryCmd::Harvest { .. } => true,
        }
    }
}

fn parse_op_class(s: &str) -> Result<OpClass, String> {
    OpClass::from_name(s).ok_or_else(|| {
        let names: Vec<_> = OpClass::ALL.iter().map(|c| c.as_str()).collect();
        format!(
            "unknown op class {}",
            ksmith_task::suggest::expected(s, &names)
        )
    })
}

fn parse_days(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Ok(d),
        _ => Err("expected a number of days, 0 or more".into()),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err("expected a win rate from 0 to 1".into()),
    }
}

/// Runs `ksmith memory ...`.
pub(crate) fn run(ctx: &Ctx, cmd: &MemoryCmd) -> Result<u8, Exit> {
    match cmd {
        MemoryCmd::List(a) => list(ctx, a),
        MemoryCmd::Show { id, json } => show(ctx, *id, *json),
        MemoryCmd::Prune(a) => prune(ctx, a),
        MemoryCmd::Harvest { run, json } => harvest(ctx, run, *json),
    }
}

/// An entry as `--json` prints it: the entry and its win rate.
fn entry_json(e: &MemoryEntry) -> Result<serde_json::Value, Exit> {
    let mut v = serde_json::to_value(e).map_err(env_err)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("win_rate".into(), e.win_rate().into());
    }
    Ok(v)
}

fn print_json(v: &serde_json::Value) -> Result<(), Exit> {
    crate::term::json(&serde_json::to_string_pretty(v).map_err(env_err)?);
    Ok(())
}

fn table(entries: &[MemoryEntry]) -> comfy_table::Table {
    let mut t = crate::report::table(&[
        "id", "created", "task", "class", "device", "hint", "change", "gain", "shown", "wins",
        "win rate",
    ]);
    for e in entries {
        t.add_row([
            e.id.to_string(),
            one(&e.created_at).into_owned(),
            one(&e.task).into_owned(),
            e.op_class.as_str().to_string(),
            one(&e.device).into_owned(),
            e.hint.map(|h| h.as_str()).unwrap_or("-").to_string(),
            one(&e.headline).into_owned(),
            e.gain.to_string(),
            e.shown.to_string(),
            e.wins.to_string(),
            format!("{:.2}", e.win_rate()),
        ]);
    }
    t
}

fn list(ctx: &Ctx, a: &ListArgs) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    let all = match &a.for_task {
        Some(dir) => {
            let task = memory::TaskInfo::of(&crate::load_task(dir)?);
            let fp = a.fingerprint.as_deref().unwrap_or("");
            memory::for_task(&store, &task, fp, a.limit).map_err(env_err)?
        }
        None => memory::entries(&store).map_err(env_err)?,
    };
    let entries: Vec<MemoryEntry> = all
        .into_iter()
        .filter(|e| a.task.as_ref().is_none_or(|t| &e.task == t))
        .filter(|e| a.op_class.is_none_or(|c| e.op_class == c))
        .collect();
    if a.json {
        let rows = entries
            .iter()
            .map(entry_json)
            .collect::<Result<Vec<_>, _>>()?;
        print_json(&serde_json::json!({ "entries": rows }))?;
    } else if entries.is_empty() {
        say!("no memory entries (runs add them when they finish; `ksmith memory harvest RUN`)");
    } else {
        say!("{}", table(&entries));
    }
    Ok(0)
}

fn show(ctx: &Ctx, id: i64, json: bool) -> Result<u8, Exit> {
    let store = ctx.store_read()?;
    let Some(e) = memory::entry(&store, id).map_err(env_err)? else {
        return Err(input(anyhow!(
            "memory entry {id}: no such entry (see `ksmith memory list`)"
        )));
    };
    if json {
        print_json(&entry_json(&e)?)?;
        return Ok(0);
    }
    say!("memory entry {}", e.id);
    say!("  from:     run {}, {}", one(&e.run), e.step);
    say!(
        "  task:     {} ({}), tests {}",
        one(&e.task),
        e.op_class.as_str(),
        one(&e.tests_hash)
    );
    say!(
        "  device:   {} (fingerprint {})",
        one(&e.device),
        one(&e.fingerprint)
    );
    if let Some(h) = e.hint {
        say!("  hint:     {}", h.as_str());
    }
    say!("  change:   {}", one(&e.headline));
    say!(
        "  gain:     {} over its parent{}",
        e.gain,
        if e.gain.interval.is_some() {
            " (timed together)"
        } else {
            ""
        }
    );
    say!(
        "  shown:    {} time(s), followed by an improvement {} time(s); win rate {:.2}",
        e.shown,
        e.wins,
        e.win_rate()
    );
    say!("  created:  {}", one(&e.created_at));
    say!("  excerpt:  {}", continued(&e.excerpt, "            "));
    Ok(0)
}

fn prune(ctx: &Ctx, a: &PruneArgs) -> Result<u8, Exit> {
    let mut store = if a.dry_run {
        ctx.store_read()?
    } else {
        ctx.store()?
    };
    let rule = PruneRule {
        older_than_days: a.older_than,
        min_win_rate: a.min_win_rate.map(|rate| WinRateFloor {
            rate,
            min_shown: a.min_shown,
        }),
    };
    let gone = memory::prune(&mut store, &rule, a.dry_run).map_err(env_err)?;
    if a.json {
        let rows = gone.iter().map(entry_json).collect::<Result<Vec<_>, _>>()?;
        print_json(&serde_json::json!({ "dry_run": a.dry_run, "pruned": rows }))?;
        return Ok(0);
    }
    if gone.is_empty() {
        say!("no entry matches; nothing pruned");
        return Ok(0);
    }
    say!("{}", table(&gone));
    say!(
        "{} {} entr{}",
        if a.dry_run { "would prune" } else { "pruned" },
        gone.len(),
        if gone.len() == 1 { "y" } else { "ies" }
    );
    Ok(0)
}

fn harvest(ctx: &Ctx, run: &str, json: bool) -> Result<u8, Exit> {
    let store = ctx.store()?;
    let h = match memory::harvest(&store, run) {
        Ok(h) => h,
        Err(e @ memory::MemoryError::NoRun(_)) => return Err(input(e)),
        Err(e) => return Err(env_err(e)),
    };
    if json {
        let added = h
            .added
            .iter()
            .map(entry_json)
            .collect::<Result<Vec<_>, _>>()?;
        let skipped: Vec<_> = h
            .skipped
            .iter()
            .map(|(s, why)| serde_json::json!({"step": s, "why": why}))
            .collect();
        print_json(&serde_json::json!({
            "run": run, "improvements": h.improvements, "added": added,
            "wins": h.wins, "skipped": skipped,
        }))?;
        return Ok(0);
    }
    say!(
        "run {}: {} improvement(s), {} new entr{}, {} win(s) scored for entries shown during it",
        one(run),
        h.improvements,
        h.added.len(),
        if h.added.len() == 1 { "y" } else { "ies" },
        h.wins
    );
    for (s, why) in &h.skipped {
        say!("  {s}: left out: {}", one(why));
    }
    if !h.added.is_empty() {
        say!("{}", table(&h.added));
    }
    Ok(0)
}
