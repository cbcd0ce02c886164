//! The MCP server: one tool per job, each calling what its subcommand calls, over stdio or
//! streamable HTTP.

use super::input::{
    Candidate, CompareInput, EvalsInput, EvaluateInput, FieldError, JudgeSettings, NoInput,
    OptimizeInput, Parameters, ReportInput, ResumeInput, RunInput, ShowInput, StatusInput,
    TuneInput, ValidateInput,
};
use super::runs::{self, ProcessState, Procs};
use crate::{Ctx, Exit, EXIT_INPUT};
use anyhow::{anyhow, Context};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What every connection's server shares: the command line's context and the run processes.
pub(crate) struct Shared {
    ctx: Ctx,
    procs: Procs,
}

impl Shared {
    /// The state of a server started with `ctx`.
    pub(crate) fn new(ctx: Ctx) -> Arc<Shared> {
        Arc::new(Shared {
            ctx,
            procs: Procs::default(),
        })
    }
}

/// Serves one MCP session on stdin and `out` until the client leaves.
pub(crate) async fn serve_stdio(shared: Arc<Shared>, out: tokio::fs::File) -> anyhow::Result<()> {
    let service = Server::new(shared)
        .serve((tokio::io::stdin(), out))
        .await
        .context("MCP session setup over stdio")?;
    service.waiting().await.context("MCP session over stdio")?;
    Ok(())
}

/// Serves streamable HTTP on `addr` (path `/mcp`, any path answers) until SIGINT or SIGTERM.
pub(crate) async fn serve_http(shared: Arc<Shared>, addr: SocketAddr) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let service = TowerToHyperService::new(StreamableHttpService::new(
        move || Ok(Server::new(shared.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    ));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let bound = listener.local_addr().context("the bound address")?;
    // The one line a script waits for before connecting (stderr: stdout is not the protocol
    // here, but scripts read a log).
    note!("ksmith mcp: listening on http://{bound}/mcp");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    loop {
        let io = tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            accepted = listener.accept() => TokioIo::new(accepted.context("accepting")?.0),
        };
        let service = service.clone();
        tokio::spawn(async move {
            // A connection's failure is the client's business; the server goes on.
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(io, service)
                .await;
        });
    }
    Ok(())
}

/// The MCP server of one session.
#[derive(Clone)]
pub(crate) struct Server {
    shared: Arc<Shared>,
    tool_router: ToolRouter<Server>,
}

/// Why a tool did not answer with its result.
enum Fail {
    /// A bad input: an `invalid_params` error naming the field.
    Field(FieldError),
    /// The environment or the store failed: a tool error the caller sees.
    Env(anyhow::Error),
}

impl Fail {
    /// A CLI error, blamed on `field` when it is an input error.
    fn from_exit(field: &str, e: Exit) -> Fail {
        let text = crate::error_chain(&e.1);
        if e.0 == EXIT_INPUT {
            Fail::Field(FieldError::new(field, text))
        } else {
            Fail::Env(anyhow!(text))
        }
    }
}

/// Maps a CLI error to a [`Fail`] blaming `field`.
fn at(field: &'static str) -> impl Fn(Exit) -> Fail {
    move |e| Fail::from_exit(field, e)
}

/// A CLI error about the server's own setup (its store, the judge's environment): no field of
/// the call is to blame, so it is a tool error whatever its exit code.
fn server_side(e: Exit) -> Fail {
    Fail::Env(anyhow!(crate::error_chain(&e.1)))
}

/// The answer to a tool call: a structured result, an error naming a field, or a tool error.
fn answer(r: Result<Value, Fail>) -> Result<CallToolResult, ErrorData> {
    match r {
        Ok(v) => Ok(CallToolResult::structured(v)),
        Err(Fail::Field(f)) => Err(f.into_mcp()),
        Err(Fail::Env(e)) => Ok(CallToolResult::error(vec![ContentBlock::text(
            crate::error_chain(&e),
        )])),
    }
}

/// Progress messages from blocking work, forwarded as MCP progress notifications.
type Reporter = Option<mpsc::UnboundedSender<(f64, Option<f64>, String)>>;

/// Runs `work` on a blocking thread, forwarding what it reports as progress notifications
/// when the caller asked for them (a `progressToken`), all sent before the answer.
async fn blocking<T: Send + 'static>(
    rc: &RequestContext<RoleServer>,
    work: impl FnOnce(Reporter) -> T + Send + 'static,
) -> Result<T, Fail> {
    let (tx, forward) = match rc.meta.get_progress_token() {
        Some(token) => {
            let (tx, mut rx) = mpsc::unbounded_channel::<(f64, Option<f64>, String)>();
            let peer = rc.peer.clone();
            let forward = tokio::spawn(async move {
                while let Some((k, n, message)) = rx.recv().await {
                    let mut p = ProgressNotificationParam::new(token.clone(), k);
                    if let Some(n) = n {
                        p = p.with_total(n);
                    }
                    // A client that went away misses its progress; the work goes on.
                    let _ = peer.notify_progress(p.with_message(message)).await;
                }
            });
            (Some(tx), Some(forward))
        }
        None => (None, None),
    };
    let out = tokio::task::spawn_blocking(move || work(tx))
        .await
        .map_err(|e| Fail::Env(anyhow!("the tool's worker failed: {e}")))?;
    if let Some(f) = forward {
        let _ = f.await;
    }
    Ok(out)
}

/// A judge stage hook that reports each stage (`[k/N] solution: stage`).
fn stage_hook(reporter: &Reporter, timing: bool) -> Option<ksmith_judge::StageHook> {
    let tx = reporter.clone()?;
    Some(Box::new(move |solution: &str, stage| {
        if let Some((k, n, name)) = crate::progress::stage_step(stage, timing) {
            let text = format!("{}: {name}", ksmith_task::escape::one_line(solution));
            let _ = tx.send((k as f64, Some(n as f64), text));
        }
    }))
}

/// The tuner's events as progress notifications.
struct ProgressSink {
    tx: mpsc::UnboundedSender<(f64, Option<f64>, String)>,
    count: std::sync::atomic::AtomicU64,
}

impl ksmith_search::EventSink for ProgressSink {
    fn emit(&self, event: ksmith_search::Event) {
        let n = self
            .count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let _ = self.tx.send((n as f64, None, runs::event_text(&event)));
    }
}

/// A candidate given as text, written where the judge reads it; removed when dropped.
struct Staged {
    path: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

/// The candidate's path: its own, or its text staged in a fresh private directory under
/// STORE/mcp/candidates (the judge copies it into the sandbox like any other).
fn stage(ctx: &Ctx, c: &Candidate) -> Result<Staged, Fail> {
    if let Some(p) = &c.path {
        return Ok(Staged {
            path: PathBuf::from(p),
            _dir: None,
        });
    }
    let source = c.source.as_deref().unwrap_or_default();
    let parent = ctx.store_dir.join("mcp").join("candidates");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("creating {}", parent.display()))
        .map_err(Fail::Env)?;
    let dir = tempfile::Builder::new()
        .prefix("candidate-")
        .tempdir_in(&parent)
        .with_context(|| format!("staging the candidate in {}", parent.display()))
        .map_err(Fail::Env)?;
    let path = dir
        .path()
        .join(c.file_name.as_deref().unwrap_or("kernel.c"));
    std::fs::write(&path, source)
        .with_context(|| format!("writing {}", path.display()))
        .map_err(Fail::Env)?;
    Ok(Staged {
        path,
        _dir: Some(dir),
    })
}

/// Loads a candidate for `task`; a problem blames `field`.
fn load_solution(
    task: &ksmith_task::Task,
    path: &Path,
    field: &str,
) -> Result<ksmith_task::Solution, Fail> {
    if !path.exists() {
        return Err(Fail::Field(FieldError::new(
            field,
            format!("{} does not exist", path.display()),
        )));
    }
    ksmith_task::Solution::load(path, task)
        .map_err(|p| Fail::Field(FieldError::new(field, format!("invalid solution:\n{p}"))))
}

/// The field a candidate is blamed by: its path or its source.
fn candidate_field(c: &Candidate, prefix: &str) -> String {
    if c.path.is_some() {
        format!("{prefix}path")
    } else {
        format!("{prefix}source")
    }
}

/// A run's state as `run_status` answers it.
#[derive(serde::Serialize)]
struct RunAnswer {
    /// The run id.
    run: String,
    /// Its process, when this server started it.
    process: Option<ProcessState>,
    /// The run as `ksmith show RUN --json` prints it (null until the run is stored).
    stored: Option<Value>,
    /// Its engine events (graph searches) from `since` on.
    events: Vec<crate::run_events::EventLine>,
    /// The `since` of the next call.
    next_event: u64,
    /// The end of its process's output (when started here), for errors and progress.
    log_tail: Option<String>,
}

impl Server {
    fn ctx(&self) -> &Ctx {
        &self.shared.ctx
    }

    /// The run as stored (`ksmith show RUN --json`), None when there is no such run yet.
    fn stored_run(ctx: &Ctx, run: &str) -> Result<Option<Value>, Fail> {
        let store = ctx.store_read().map_err(server_side)?;
        let Some(row) = store
            .run(run)
            .with_context(|| format!("reading run {run}"))
            .map_err(Fail::Env)?
        else {
            return Ok(None);
        };
        crate::agent::commands::run_json(&store, &row)
            .map(Some)
            .map_err(server_side)
    }

    /// Where `run` stands, with its events from `since`.
    fn run_answer(&self, run: &str, since: u64) -> Result<RunAnswer, Fail> {
        let ctx = self.ctx();
        let process = self.shared.procs.state(run);
        let stored = Self::stored_run(ctx, run)?;
        let events =
            runs::read_events(&runs::events_path(&ctx.store_dir, run), since).map_err(Fail::Env)?;
        let next_event = events.last().map_or(since, |e| e.seq + 1);
        let log_tail = process
            .as_ref()
            .and_then(|_| runs::log_tail(&runs::log_path(&ctx.store_dir, run), 4000));
        Ok(RunAnswer {
            run: run.to_string(),
            process,
            stored,
            events,
            next_event,
            log_tail,
        })
    }

    /// Whether `run` has ended: its process (when started here) has exited, else its stored
    /// status is no longer running (a run whose process is gone reads as interrupted).
    fn ended(&self, run: &str) -> Result<bool, Fail> {
        if let Some(p) = self.shared.procs.state(run) {
            return Ok(!p.running);
        }
        Ok(match Self::stored_run(self.ctx(), run)? {
            Some(v) => v["status"] != "running",
            None => true,
        })
    }

    /// Waits up to `wait` for `run` to end, sending each new event from `since` as a progress
    /// notification; answers where it stands (with every event from `since`).
    async fn watch(
        &self,
        rc: &RequestContext<RoleServer>,
        run: &str,
        since: u64,
        wait: Duration,
    ) -> Result<RunAnswer, Fail> {
        let token: Option<ProgressToken> = rc.meta.get_progress_token();
        let path = runs::events_path(&self.ctx().store_dir, run);
        let start = Instant::now();
        let mut next = since;
        loop {
            // Read before checking the end, so the last events are sent once it has ended.
            let ended = self.ended(run)?;
            for e in runs::read_events(&path, next).map_err(Fail::Env)? {
                next = e.seq + 1;
                if let Some(t) = &token {
                    let p = ProgressNotificationParam::new(t.clone(), next as f64)
                        .with_message(runs::event_text(&e.event));
                    let _ = rc.peer.notify_progress(p).await;
                }
            }
            if ended || start.elapsed() >= wait {
                break;
            }
            tokio::select! {
                _ = rc.ct.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        self.run_answer(run, since)
    }

    /// Starts `ksmith ARGS` as run `run` and waits until the run is stored (or the process
    /// ended first: its own error, an input error naming `field` when it exited with 2).
    async fn start_run(&self, run: &str, args: Vec<String>, field: &str) -> Result<(), Fail> {
        let ctx = self.ctx().clone();
        self.shared
            .procs
            .spawn(&ctx, run, &args)
            .map_err(Fail::Env)?;
        let start = Instant::now();
        loop {
            if Self::stored_run(&ctx, run)?.is_some() {
                return Ok(());
            }
            if let Some(p) = self.shared.procs.state(run) {
                if !p.running {
                    let tail = runs::log_tail(&runs::log_path(&ctx.store_dir, run), 4000)
                        .unwrap_or_default();
                    let why = tail
                        .lines()
                        .rev()
                        .find(|l| l.starts_with("error: "))
                        .map(|l| l.trim_start_matches("error: ").to_string())
                        .unwrap_or(tail);
                    return Err(match p.exit_code {
                        Some(2) => Fail::Field(FieldError::new(blamed(&why, field), why)),
                        c => Fail::Env(anyhow!(
                            "the run's process ended (exit {}) before the run started: {why}",
                            c.map_or("?".into(), |c| c.to_string())
                        )),
                    });
                }
            }
            if start.elapsed() > Duration::from_secs(300) {
                // Still setting up (a first Python environment, a model's preflight): the
                // caller polls `run_status`.
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The input field a run's own error is about: the flag or model its message starts with,
/// else `default`.
fn blamed<'a>(message: &str, default: &'a str) -> &'a str {
    const FLAGS: [(&str, &str); 12] = [
        ("--model", "model"),
        ("model ", "model"),
        ("--from", "from"),
        ("--out", "out"),
        ("--strategy", "strategy"),
        ("--jobs", "jobs"),
        ("--fix-attempts", "fix_attempts"),
        ("--max-nodes", "limits.max_nodes"),
        ("--max-evals", "limits.max_evals"),
        ("--max-calls", "limits.max_calls"),
        ("--max-cost", "limits.max_cost"),
        ("--iterations", "limits.iterations"),
    ];
    FLAGS
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or(default, |(_, field)| field)
}

/// `optimize`'s flags for a judge's frozen settings.
fn judge_flags(j: &Option<JudgeSettings>) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(j) = j {
        if let Some(t) = j.timeout_s {
            a.extend(["--timeout".into(), t.to_string()]);
        }
        if let Some(s) = j.seeds {
            a.extend(["--seeds".into(), s.to_string()]);
        }
        if let Some(m) = j.min_time_ms {
            a.extend(["--min-time-ms".into(), m.to_string()]);
        }
    }
    a
}

#[tool_router]
impl Server {
    /// A server for one session.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Server {
            shared,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Check a task (or every task of a suite): definition, reference, tolerances, solutions. Answers as `ksmith validate --json`. Seconds per task (the reference runs on every workload set); `no_run` checks statically in milliseconds."
    )]
    async fn validate(
        &self,
        Parameters(i): Parameters<ValidateInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ctx = self.ctx().clone();
        let r = blocking(&rc, move |rep| {
            let mut done = 0u32;
            let mut each = |t: &crate::TaskValidation| {
                done += 1;
                if let Some(tx) = &rep {
                    let state = if t.valid { "ok" } else { "FAIL" };
                    let _ = tx.send((f64::from(done), None, format!("{state} {}", t.path)));
                }
            };
            let report =
                crate::validate_path(&ctx, Path::new(&i.path), i.no_run == Some(true), &mut each)
                    .map_err(at("path"))?;
            serde_json::to_value(report).map_err(|e| Fail::Env(e.into()))
        })
        .await;
        answer(r.and_then(|r| r))
    }

    #[tool(
        description = "Judge one candidate (source text or a path) on a task with the full judge: policy, build, correctness on every workload and seed, timing against the XLA baseline, roofline. The candidate is untrusted and runs sandboxed. Answers as `ksmith eval --json` (status, reason, correctness, performance, environment, id, reused). Seconds to a minute; a stored verdict of the same code and settings is returned at once unless `again`."
    )]
    async fn evaluate(
        &self,
        Parameters(i): Parameters<EvaluateInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ctx = self.ctx().clone();
        let r = blocking(&rc, move |rep| -> Result<Value, Fail> {
            let task = crate::load_task(Path::new(&i.task)).map_err(at("task"))?;
            let cand = i.candidate();
            let staged = stage(&ctx, &cand)?;
            let solution = load_solution(&task, &staged.path, &candidate_field(&cand, ""))?;
            let opts = i.judge.clone().unwrap_or_default().opts();
            let mut store = ctx.store().map_err(server_side)?;
            let mut judge = ctx.judge(&opts).map_err(server_side)?;
            judge.set_stage_hook(stage_hook(&rep, !opts.no_timing));
            let reuse = if i.again == Some(true) {
                ksmith_search::Reuse::Never
            } else {
                ksmith_search::Reuse::Stored
            };
            let evaluated = ksmith_search::Evaluator::new(&mut judge, &mut store)
                .with_reuse(reuse)
                .evaluate(&task, &solution, &ksmith_search::Purpose::Plain)
                // Its input errors are the task's own code failing (the reference raised).
                .map_err(|e| Fail::from_exit("task", crate::eval_err(e)))?;
            crate::eval_json(evaluated.id, evaluated.reused, &evaluated.result).map_err(at("path"))
        })
        .await;
        answer(r.and_then(|r| r))
    }

    #[tool(
        description = "Judge 2 to 8 candidates and time those that pass side by side (same rounds, same baseline calls), each decided against the first with an interval. Answers as `ksmith eval TASK A B --json` (results, versus, decisions, winner). About the sum of their evaluations; an undecided pair is timed again with more rounds."
    )]
    async fn compare(
        &self,
        Parameters(i): Parameters<CompareInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ctx = self.ctx().clone();
        let r = blocking(&rc, move |rep| -> Result<Value, Fail> {
            let task = crate::load_task(Path::new(&i.task)).map_err(at("task"))?;
            let mut staged = Vec::new();
            let mut solutions = Vec::new();
            for (k, c) in i.candidates.iter().enumerate() {
                let s = stage(&ctx, c)?;
                solutions.push(load_solution(
                    &task,
                    &s.path,
                    &candidate_field(c, &format!("candidates[{k}].")),
                )?);
                staged.push(s);
            }
            let opts = i.judge.clone().unwrap_or_default().opts();
            let mut store = ctx.store().map_err(server_side)?;
            let mut judge = ctx.judge(&opts).map_err(server_side)?;
            judge.set_stage_hook(stage_hook(&rep, !opts.no_timing));
            let (ids, cmp) = crate::compare_decided(&mut judge, &mut store, &task, &solutions)
                .map_err(at("task"))?;
            Ok(crate::comparison_json(&ids, &cmp))
        })
        .await;
        answer(r.and_then(|r| r))
    }

    #[tool(
        description = "Autotune a solution's declared tunables (exhaustive, random, hillclimb or genetic, raced against the best so far), re-time the leaders with the untuned solution and write the winner. Answers as `ksmith tune --json`. About one evaluation per configuration (seconds each): minutes for a budget of 20."
    )]
    async fn tune(
        &self,
        Parameters(i): Parameters<TuneInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ctx = self.ctx().clone();
        let r = blocking(&rc, move |rep| -> Result<Value, Fail> {
            let observer = rep.map(|tx| ProgressSink {
                tx,
                count: Default::default(),
            });
            let args = crate::tune::TuneArgs {
                task: PathBuf::from(&i.task),
                solution: PathBuf::from(&i.solution),
                search: crate::tune::SearchArgs {
                    strategy: i.strategy.map_or("hillclimb", |s| s.name()).to_string(),
                    budget: i.budget.unwrap_or(20),
                    time_budget: i.time_budget_s,
                    seed: i.seed.unwrap_or(1),
                    no_race: i.no_race == Some(true),
                    confirm: i.confirm.unwrap_or(3),
                },
                out: i.out.as_ref().map(PathBuf::from),
                json: true,
                opts: i.judge.clone().unwrap_or_default().opts(),
            };
            let observer = observer
                .as_ref()
                .map(|o| o as &dyn ksmith_search::EventSink);
            Ok(crate::tune::tune_and_write(&ctx, &args, observer)
                .map_err(at("solution"))?
                .json)
        })
        .await;
        answer(r.and_then(|r| r))
    }

    #[tool(
        description = "Start an optimize run in the background: the agent loop, or a graph search with `strategy` (loop, best-of-n, parallel, beam, greedy, evolve), with any model `ksmith optimize --model` takes. Answers once the run is stored, with its id (or waits `wait_s`, sending the engine's events as progress notifications). Poll with run_status; stop with run_stop. Minutes to hours, by its limits."
    )]
    async fn optimize_start(
        &self,
        Parameters(i): Parameters<OptimizeInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let run = runs::new_run_id();
        let mut args = vec!["optimize".to_string(), i.task.clone()];
        args.extend(["--model".into(), i.model.clone()]);
        if let Some(s) = i.strategy {
            args.extend(["--strategy".into(), s.as_str().into()]);
        }
        for (flag, v) in [("--from", &i.from), ("--out", &i.out)] {
            if let Some(v) = v {
                args.extend([flag.to_string(), v.clone()]);
            }
        }
        if let Some(j) = i.jobs {
            args.extend(["--jobs".into(), j.to_string()]);
        }
        if let Some(f) = i.fix_attempts {
            args.extend(["--fix-attempts".into(), f.to_string()]);
        }
        if let Some(b) = i.tune_budget {
            args.extend(["--tune-budget".into(), b.to_string()]);
        }
        if i.profile == Some(false) {
            args.push("--no-profile".into());
        }
        if let Some(s) = i.seed {
            args.extend(["--seed".into(), s.to_string()]);
        }
        if let Some(l) = &i.limits {
            args.extend(l.flags(i.strategy.is_some()));
        }
        args.extend(judge_flags(&i.judge));
        let r = async {
            self.start_run(&run, args, "task").await?;
            let a = self
                .watch(&rc, &run, 0, Duration::from_secs(i.wait_s.unwrap_or(0)))
                .await?;
            serde_json::to_value(a).map_err(|e| Fail::Env(e.into()))
        }
        .await;
        answer(r)
    }

    #[tool(
        description = "Continue a stopped, interrupted, failed or finished run (with raised limits) in the background, as `ksmith resume RUN`. Answers at once (or waits `wait_s` with progress notifications)."
    )]
    async fn run_resume(
        &self,
        Parameters(i): Parameters<ResumeInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if self.shared.procs.state(&i.run).is_some_and(|p| p.running) {
            return Err(FieldError::new("run", "is running (started by this server)").into_mcp());
        }
        let mut args = vec!["resume".to_string(), i.run.clone()];
        if let Some(l) = &i.limits {
            args.extend(l.flags(false));
        }
        let since = runs::read_events(&runs::events_path(&self.ctx().store_dir, &i.run), 0)
            .map(|e| e.len() as u64)
            .unwrap_or(0);
        let r = async {
            let Some(stored) = Self::stored_run(self.ctx(), &i.run)? else {
                return Err(Fail::Field(FieldError::new(
                    "run",
                    "no such run in the store",
                )));
            };
            if stored["status"] == "running" {
                return Err(Fail::Field(FieldError::new(
                    "run",
                    format!("is running (pid {})", stored["pid"]),
                )));
            }
            self.shared
                .procs
                .spawn(self.ctx(), &i.run, &args)
                .map_err(Fail::Env)?;
            let a = self
                .watch(
                    &rc,
                    &i.run,
                    since,
                    Duration::from_secs(i.wait_s.unwrap_or(0)),
                )
                .await?;
            serde_json::to_value(a).map_err(|e| Fail::Env(e.into()))
        }
        .await;
        answer(r)
    }

    #[tool(
        description = "Where a run stands: its process (when started here), the stored run as `ksmith show RUN --json`, its engine events from `since`, the end of its log. With `wait_s`, waits for it to end while sending each event as a progress notification. Milliseconds, or up to wait_s."
    )]
    async fn run_status(
        &self,
        Parameters(i): Parameters<StatusInput>,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let r = async {
            if self.shared.procs.state(&i.run).is_none()
                && Self::stored_run(self.ctx(), &i.run)?.is_none()
            {
                return Err(Fail::Field(FieldError::new("run", "no such run")));
            }
            let a = self
                .watch(
                    &rc,
                    &i.run,
                    i.since.unwrap_or(0),
                    Duration::from_secs(i.wait_s.unwrap_or(0)),
                )
                .await?;
            serde_json::to_value(a).map_err(|e| Fail::Env(e.into()))
        }
        .await;
        answer(r)
    }

    #[tool(
        description = "Stop a run started by this server, as Ctrl-C would (SIGTERM, then SIGKILL after 10 s): it can be resumed with run_resume. Seconds."
    )]
    async fn run_stop(
        &self,
        Parameters(i): Parameters<RunInput>,
        _rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if self.shared.procs.state(&i.run).is_none() {
            return Err(FieldError::new(
                "run",
                "was not started by this server (stop it where it runs)",
            )
            .into_mcp());
        }
        let shared = self.shared.clone();
        let run = i.run.clone();
        let r = async {
            tokio::task::spawn_blocking(move || -> Result<(), Fail> {
                shared
                    .procs
                    .stop(&run, Duration::from_secs(10))
                    .map_err(Fail::Env)?;
                mark_interrupted(&shared.ctx, &run)
            })
            .await
            .map_err(|e| Fail::Env(anyhow!("stopping: {e}")))??;
            serde_json::to_value(self.run_answer(&i.run, 0)?).map_err(|e| Fail::Env(e.into()))
        }
        .await;
        answer(r)
    }

    #[tool(
        description = "List agent runs and searches, newest first, as `ksmith runs --json`. Milliseconds."
    )]
    async fn runs(&self, Parameters(_): Parameters<NoInput>) -> Result<CallToolResult, ErrorData> {
        let r = self
            .ctx()
            .store_read()
            .and_then(|s| crate::agent::commands::runs_json(&s))
            .map_err(server_side);
        answer(r)
    }

    #[tool(
        description = "List stored evaluations, newest first, with filters, as `ksmith evals --json` (under `evals`). Milliseconds."
    )]
    async fn evals(
        &self,
        Parameters(i): Parameters<EvalsInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let r = (|| -> Result<Value, Fail> {
            let status = i
                .status
                .as_deref()
                .map(crate::results::parse_status)
                .transpose()
                .map_err(|m| Fail::Field(FieldError::new("status", m)))?;
            let args = crate::results::EvalsArgs {
                task: i.task.clone(),
                solution: i.solution.clone(),
                status,
                since: i.since.clone(),
                until: i.until.clone(),
                limit: i.limit.unwrap_or(50),
                json: true,
            };
            let store = self.ctx().store_read().map_err(server_side)?;
            // The only input errors here are the dates', and they name their flag.
            // Already `{"evals": [...]}`, as `ksmith evals --json` prints it.
            let listed = crate::results::evals_json(&store, &args).map_err(|e| {
                let field = if e.1.to_string().starts_with("--until") {
                    "until"
                } else {
                    "since"
                };
                Fail::from_exit(field, e)
            })?;
            Ok(listed)
        })();
        answer(r)
    }

    #[tool(
        description = "Show a stored evaluation (a number) or a run (run-...), as `ksmith show ID --json`. Milliseconds."
    )]
    async fn show(
        &self,
        Parameters(i): Parameters<ShowInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let r = (|| -> Result<Value, Fail> {
            let ctx = self.ctx();
            if let Ok(n) = i.id.parse::<i64>() {
                let store = ctx.store_read().map_err(server_side)?;
                let ev = store
                    .get(n)
                    .context("reading the evaluation")
                    .map_err(Fail::Env)?
                    .ok_or_else(|| {
                        Fail::Field(FieldError::new("id", format!("no evaluation {n}")))
                    })?;
                return crate::stored_eval_json(&ev).map_err(at("id"));
            }
            Self::stored_run(ctx, &i.id)?
                .ok_or_else(|| Fail::Field(FieldError::new("id", format!("no run {}", i.id))))
        })();
        answer(r)
    }

    #[tool(
        description = "Write a run's self-contained HTML report (best speedup over time, the tree, the winner's diff and roofline, the cost) and answer where it is with a summary. Under a second."
    )]
    async fn report(
        &self,
        Parameters(i): Parameters<ReportInput>,
    ) -> Result<CallToolResult, ErrorData> {
        let r =
            crate::run_report::write_report(self.ctx(), &i.run, i.out.as_deref().map(Path::new))
                .map_err(at("run"))
                .and_then(|w| serde_json::to_value(w).map_err(|e| Fail::Env(e.into())));
        answer(r)
    }
}

/// A run stopped from here whose process could not record it (a search ends at once on
/// SIGTERM) is marked interrupted, as `ksmith runs` would show it, so it reads as resumable.
fn mark_interrupted(ctx: &Ctx, run: &str) -> Result<(), Fail> {
    let store = ctx.store().map_err(server_side)?;
    let Some(mut row) = store
        .run(run)
        .context("reading the run")
        .map_err(Fail::Env)?
    else {
        return Ok(());
    };
    if row.status == ksmith_store::RunStatus::Running
        && matches!(store.run_holder(run), ksmith_store::RunHolder::Free)
    {
        row.status = ksmith_store::RunStatus::Interrupted;
        row.stop_reason = Some("stopped by run_stop (ksmith mcp)".into());
        store
            .update_run(&row)
            .context("recording the stop")
            .map_err(Fail::Env)?;
    }
    Ok(())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ksmith", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "KernelSmith: judge, compare, tune and search for fast verified compute kernels. \
                 Candidates are untrusted and judged in a sandbox. Long runs (optimize_start) go \
                 on in the background: poll run_status, stop with run_stop. docs/mcp.md has the \
                 costs.",
            )
    }
}
