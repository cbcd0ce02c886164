//! `ksmith serve`: a local web page over the store (docs/serve.md): runs and evaluations
//! listed, one run watched live over server-sent events (its nodes, best so far, the node being
//! expanded with its prompt and reply, the judge's stage), its final judgement and report, and
//! human-in-the-loop review of an interactive run (approve, edit, guidance, rerun, stop).
//!
//! HTTP and SSE are axum's on the tokio runtime the MCP server already uses. Runs started
//! from the page are `ksmith optimize` processes of their own, as `ksmith mcp` starts them
//! (`crate::mcp::runs::Procs`), their files under STORE/serve/RUN/. Every page is rendered with
//! model and candidate text escaped, under a Content-Security-Policy that allows only this
//! server's own static script and style.

mod live;
mod pages;
pub(crate) mod review;
mod stream;

use crate::mcp::runs::{self as procs, Procs};
use crate::{env_err, input as input_err, Ctx, Exit};
use anyhow::{anyhow, Context};
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ksmith_search::agent::state::Verdict;
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `ksmith serve`.
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8780", value_name = "ADDR:PORT")]
    addr: SocketAddr,
    /// A secret every request must carry (`?token=` once, then a cookie; or `Authorization:
    /// Bearer`). Required to bind an address beyond loopback.
    #[arg(long, env = "KSMITH_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// What every request handler shares.
pub(crate) struct App {
    /// The store and machine settings (runs started here get them).
    pub ctx: Ctx,
    /// Runs started from the page.
    pub procs: Procs,
    /// The token requests must carry, when one was set.
    token: Option<String>,
    /// Bound to a loopback address: requests must name a loopback host (against DNS
    /// rebinding, where a foreign page's name resolves to 127.0.0.1).
    loopback: bool,
}

/// The directory of the page's own runs inside the store.
const AREA: &str = "serve";

/// The script and style, embedded: no build step, nothing fetched from elsewhere.
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// Only this server's own files; no inline script or style, no framing, no foreign form
/// target. The report page (no script at all) gets its own, stricter on script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The report page is one self-contained file with its style inline and no script.
const REPORT_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'";

/// The token's cookie.
const COOKIE: &str = "ksmith_token";

/// `ksmith serve`.
pub(crate) fn run(ctx: &Ctx, args: &ServeArgs) -> Result<u8, Exit> {
    let loopback = args.addr.ip().is_loopback();
    let token = args.token.clone().filter(|t| !t.is_empty());
    if !loopback && token.is_none() {
        return Err(input_err(anyhow!(
            "--addr {}: beyond loopback the page needs --token (every request must carry it); or bind 127.0.0.1",
            args.addr
        )));
    }
    if let Some(t) = &token {
        // URL- and cookie-safe characters only: it travels in `?token=` and in a cookie.
        if t.len() < 16
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
        {
            return Err(input_err(anyhow!(
                "--token: at least 16 characters of letters, digits, `-`, `_`, `.` or `~`"
            )));
        }
    }
    // Fail on an unreadable store now, not on the first page.
    ctx.store_read()?;
    let app = Arc::new(App {
        ctx: ctx.clone(),
        procs: Procs::in_area(AREA),
        token,
        loopback,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
        .map_err(env_err)?;
    rt.block_on(serve(app, args.addr)).map_err(env_err)?;
    // Runs started from the page go on: they are resumable processes of their own.
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(0)
}

/// The routes.
fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(runs_page))
        .route("/evals", get(evals_page))
        .route("/evals/{id}", get(eval_page))
        .route("/runs", post(start_run))
        .route("/runs/{run}", get(run_page))
        .route("/runs/{run}/state", get(run_state))
        .route("/runs/{run}/events", get(stream::events))
        .route("/runs/{run}/report", get(report))
        .route("/runs/{run}/review", post(review_answer))
        .route("/runs/{run}/stop", post(stop_run))
        .route("/static/app.js", get(app_js))
        .route("/static/app.css", get(app_css))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

async fn serve(app: Arc<App>, addr: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    // The first line on stdout is the address (port 0 picks one; scripts and tests read it).
    say!("ksmith serve: http://{bound}/");
    if app.token.is_some() {
        note!("ksmith serve: every request needs the token (open http://{bound}/?token=TOKEN)");
    }
    axum::serve(listener, router(app))
        .with_graceful_shutdown(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async {
                    match term.as_mut() {
                        Some(t) => { t.recv().await; }
                        None => std::future::pending::<()>().await,
                    }
                } => {}
            }
        })
        .await
        .context("serving")
}

/// An error page or JSON error with its status; the message is escaped where shown.
pub(crate) struct Failure(StatusCode, String);

impl Failure {
    fn bad(msg: impl Into<String>) -> Failure {
        Failure(StatusCode::BAD_REQUEST, msg.into())
    }
    fn not_found(msg: impl Into<String>) -> Failure {
        Failure(StatusCode::NOT_FOUND, msg.into())
    }
    fn server(e: impl std::fmt::Display) -> Failure {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
    fn exit(e: Exit) -> Failure {
        let code = if e.0 == crate::EXIT_INPUT {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        Failure(code, format!("{:#}", e.1))
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = pages::error_page(self.0, &self.1);
        (self.0, Html(body)).into_response()
    }
}

/// A JSON endpoint's failure: `{"error": ...}` with its status.
struct JsonFailure(Failure);

impl From<Failure> for JsonFailure {
    fn from(f: Failure) -> Self {
        JsonFailure(f)
    }
}

impl IntoResponse for JsonFailure {
    fn into_response(self) -> Response {
        (self.0 .0, Json(serde_json::json!({ "error": self.0 .1 }))).into_response()
    }
}

/// Runs blocking store work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(Failure::server)?
}

/// A run id from a URL, checked (it names files under the store).
fn run_id(run: &str) -> Result<String, Failure> {
    if procs::valid_run_id(run) {
        Ok(run.to_string())
    } else {
        Err(Failure::bad("not a run id (run-...)"))
    }
}

/// Every request: the host and token checked, the security headers set on the answer.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if app.loopback && !host_is_loopback(req.headers()) {
        return plain(
            StatusCode::FORBIDDEN,
            "this server answers loopback hosts only",
        );
    }
    let mut set_cookie = None;
    if let Some(want) = &app.token {
        match offered_token(&req) {
            Some((got, from_query)) if same(got.as_bytes(), want.as_bytes()) => {
                if from_query {
                    set_cookie = Some(format!(
                        "{COOKIE}={want}; Path=/; HttpOnly; SameSite=Strict"
                    ));
                }
            }
            _ => return plain(StatusCode::UNAUTHORIZED, "a valid token is required"),
        }
    }
    // A state-changing request must come from this page's own script: JSON (which a foreign
    // page's form cannot send without a preflight we never answer) and, when the browser
    // names its origin, this host's.
    if req.method() == axum::http::Method::POST && !same_origin_json(req.headers()) {
        return plain(
            StatusCode::FORBIDDEN,
            "a POST must be JSON from this page's own origin",
        );
    }
    let report = req.uri().path().ends_with("/report");
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(if report { REPORT_CSP } else { CSP }),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(c) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        h.insert(header::SET_COOKIE, c);
    }
    res
}

/// A short text answer (refusals), under the same headers as any other.
fn plain(code: StatusCode, msg: &'static str) -> Response {
    let mut r = (code, msg).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// Whether the request's Host names this machine's loopback (any port).
fn host_is_loopback(h: &HeaderMap) -> bool {
    let Some(host) = h.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        // `[::1]:8780`, `127.0.0.1:8780`, `localhost:8780`; a bare `[::1]` has a colon inside.
        Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => n,
        _ => host,
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The token a request carries: its `Authorization: Bearer`, its cookie, or `?token=` (the
/// last true when it came in the query, so the answer sets the cookie).
fn offered_token(req: &Request) -> Option<(String, bool)> {
    let h = req.headers();
    if let Some(t) = h
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some((t.trim().to_string(), false));
    }
    if let Some(q) = req.uri().query() {
        if let Ok(pairs) = serde_urlencoded::from_str::<Vec<(String, String)>>(q) {
            if let Some((_, t)) = pairs.into_iter().find(|(k, _)| k == "token") {
                return Some((t, true));
            }
        }
    }
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(&format!("{COOKIE}="))
                .map(str::to_string)
        })
        .map(|t| (t, false))
}

/// Equal bytes, compared in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A POST from this page's script: a JSON body, and an Origin (when sent) naming the Host.
fn same_origin_json(h: &HeaderMap) -> bool {
    let json = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        });
    let origin_ok = match h.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(o) => h
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|host| o == format!("http://{host}") || o == format!("https://{host}")),
    };
    json && origin_ok
}

async fn app_js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        APP_JS,
    )
}

async fn app_css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS)
}

/// `/`: every run, newest first, and the form that starts one.
async fn runs_page(State(app): State<Arc<App>>) -> Result<Html<String>, Failure> {
    blocking(move || {
        let store = app.ctx.store_read().map_err(Failure::exit)?;
        let runs = crate::agent::commands::runs_json(&store).map_err(Failure::exit)?;
        Ok(Html(pages::runs_page(&runs)))
    })
    .await
}

/// `/evals`: the newest stored evaluations.
async fn evals_page(State(app): State<Arc<App>>) -> Result<Html<String>, Failure> {
    blocking(move || {
        let store = app.ctx.store_read().map_err(Failure::exit)?;
        let args = crate::results::EvalsArgs {
            task: None,
            solution: None,
            status: None,
            since: None,
            until: None,
            limit: 200,
            json: true,
        };
        let evals = crate::results::evals_json(&store, &args).map_err(Failure::exit)?;
        Ok(Html(pages::evals_page(&evals)))
    })
    .await
}

/// `/evals/ID`: one evaluation as `ksmith show ID --json` shows it.
async fn eval_page(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Html<String>, Failure> {
    let n: i64 = id
        .parse()
        .map_err(|_| Failure::bad("an evaluation id is a number"))?;
    blocking(move || {
        let store = app.ctx.store_read().map_err(Failure::exit)?;
        let ev = store
            .get(n)
            .map_err(Failure::server)?
            .ok_or_else(|| Failure::not_found(format!("no evaluation {n}")))?;
        let v = crate::stored_eval_json(&ev).map_err(Failure::exit)?;
        Ok(Html(pages::eval_page(n, &v)))
    })
    .await
}

/// `/runs/RUN`: the run, rendered as it stands; the script keeps it live.
async fn run_page(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Html<String>, Failure> {
    let run = run_id(&run)?;
    blocking(move || {
        let state = live::RunState::read(&app, &run)?
            .ok_or_else(|| Failure::not_found(format!("no run {run} in this store")))?;
        Ok(Html(pages::run_page(&state)))
    })
    .await
}

/// `/runs/RUN/state`: what the page shows, as JSON (the `state` event's document).
async fn run_state(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Json<live::RunState>, JsonFailure> {
    let run = run_id(&run)?;
    let state = blocking(move || {
        live::RunState::read(&app, &run)?
            .ok_or_else(|| Failure::not_found(format!("no run {run} in this store")))
    })
    .await?;
    Ok(Json(state))
}

/// `/runs/RUN/report`: the run's HTML report, written now (`ksmith report RUN`) and shown.
async fn report(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Html<String>, Failure> {
    let run = run_id(&run)?;
    blocking(move || {
        let store = app.ctx.store_read().map_err(Failure::exit)?;
        // Written into the store when it can be (where `ksmith report` puts it), else to a
        // private temporary file: a read-only store still gets its page.
        let tmp;
        let out = if store.is_read_only() {
            tmp = tempfile::Builder::new()
                .suffix(".html")
                .tempfile()
                .map_err(Failure::server)?;
            Some(tmp.path().to_path_buf())
        } else {
            None
        };
        drop(store);
        let written = crate::run_report::write_report(&app.ctx, &run, out.as_deref())
            .map_err(Failure::exit)?;
        let page = std::fs::read_to_string(&written.path)
            .with_context(|| format!("reading {}", written.path))
            .map_err(Failure::server)?;
        Ok(Html(page))
    })
    .await
}

/// What the page's start form sends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartRequest {
    /// The task directory (on this machine, relative to the server's directory).
    task: String,
    /// `provider:model`.
    model: String,
    /// A graph-search strategy; none: the agent loop.
    #[serde(default)]
    strategy: Option<String>,
    /// The solution to start from.
    #[serde(default)]
    from: Option<String>,
    /// Wait at every review point for the page's answer (agent loop only).
    #[serde(default)]
    interactive: bool,
    /// Iterations of the agent loop.
    #[serde(default)]
    iterations: Option<u32>,
    /// Nodes of a graph search.
    #[serde(default)]
    max_nodes: Option<u64>,
    /// Minimum timed milliseconds per side (judge setting).
    #[serde(default)]
    min_time_ms: Option<u64>,
    /// Configurations the agent loop's autotuner may try per iteration (0: no tuning).
    #[serde(default)]
    tune_budget: Option<u64>,
    /// Skip the agent loop's profile stage.
    #[serde(default)]
    no_profile: bool,
}

/// A flag value from the page must not read as a flag itself.
fn flag_value(field: &str, v: &str) -> Result<String, Failure> {
    let v = v.trim();
    if v.is_empty() || v.starts_with('-') || v.contains('\0') {
        return Err(Failure::bad(format!("{field}: expected a value")));
    }
    Ok(v.to_string())
}

/// `POST /runs`: starts `ksmith optimize` as a process of its own; answers `{run}` once it is
/// stored (or the run's own error).
async fn start_run(
    State(app): State<Arc<App>>,
    body: Result<Json<StartRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<serde_json::Value>, JsonFailure> {
    let Json(r) = body.map_err(|e| Failure::bad(e.body_text()))?;
    let mut args = vec![
        "optimize".to_string(),
        flag_value("task", &r.task)?,
        "--model".into(),
        flag_value("model", &r.model)?,
    ];
    if let Some(s) = r.strategy.as_deref().filter(|s| !s.trim().is_empty()) {
        args.extend(["--strategy".into(), flag_value("strategy", s)?]);
    }
    if let Some(f) = r.from.as_deref().filter(|s| !s.trim().is_empty()) {
        args.extend(["--from".into(), flag_value("from", f)?]);
    }
    if r.interactive {
        args.extend(["--review".into(), "web".into()]);
    }
    if let Some(n) = r.iterations {
        args.extend(["--iterations".into(), n.to_string()]);
    }
    if let Some(n) = r.max_nodes {
        args.extend(["--max-nodes".into(), n.to_string()]);
    }
    if let Some(n) = r.min_time_ms {
        args.extend(["--min-time-ms".into(), n.to_string()]);
    }
    if let Some(n) = r.tune_budget {
        args.extend(["--tune-budget".into(), n.to_string()]);
    }
    if r.no_profile {
        args.push("--no-profile".into());
    }
    let run = procs::new_run_id();
    app.procs
        .spawn(&app.ctx, &run, &args)
        .map_err(Failure::server)?;
    // Until the run is stored (a model's preflight, a first Python environment) or its
    // process ended with its own error.
    let started = std::time::Instant::now();
    loop {
        let (a, id) = (app.clone(), run.clone());
        let stored = blocking(move || {
            let store = a.ctx.store_read().map_err(Failure::exit)?;
            store.run(&id).map_err(Failure::server).map(|r| r.is_some())
        })
        .await?;
        if stored {
            return Ok(Json(serde_json::json!({ "run": run })));
        }
        if let Some(p) = app.procs.state(&run) {
            if !p.running {
                let log = live::serve_log_tail(&app.ctx.store_dir, &run);
                let why = log
                    .lines()
                    .rev()
                    .find_map(|l| l.strip_prefix("error: "))
                    .map(str::to_string)
                    .unwrap_or(log);
                return Err(Failure::bad(why).into());
            }
        }
        if started.elapsed() > Duration::from_secs(300) {
            return Ok(Json(serde_json::json!({ "run": run })));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The page's answer to a review.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewRequest {
    /// The pending review's id (from the state).
    id: String,
    /// approve, edit, guidance, rerun or stop.
    action: ReviewAction,
    /// The edited text (edit) or the guidance (guidance).
    #[serde(default)]
    text: Option<String>,
}

/// What the page's buttons send.
#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum ReviewAction {
    /// Use the artifact as it is.
    Approve,
    /// Use the box's text instead.
    Edit,
    /// Reject it: the box's text goes to the agent's next call.
    Guidance,
    /// Ask the agent again.
    Rerun,
    /// Pause the run (resumable).
    Stop,
}

/// `POST /runs/RUN/review`: the answer to the run's pending review, as the terminal's verdict.
async fn review_answer(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
    body: Result<Json<ReviewRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<serde_json::Value>, JsonFailure> {
    let run = run_id(&run)?;
    let Json(r) = body.map_err(|e| Failure::bad(e.body_text()))?;
    let text = || -> Result<String, Failure> {
        match r.text.as_deref() {
            Some(t) if !t.trim().is_empty() => Ok(t.to_string()),
            _ => Err(Failure::bad("text: required for edit and guidance")),
        }
    };
    let verdict = match r.action {
        ReviewAction::Approve => Verdict::Approve,
        ReviewAction::Edit => Verdict::Edited(text()?),
        // The terminal takes one line of guidance; the page's box may hold several.
        ReviewAction::Guidance => Verdict::Guidance(text()?),
        ReviewAction::Rerun => Verdict::Rerun,
        ReviewAction::Stop => Verdict::Quit,
    };
    let id = r.id;
    blocking(move || {
        review::answer(&app.ctx.store_dir, &run, &id, verdict)
            .map_err(|e| Failure(StatusCode::CONFLICT, format!("{e:#}")))?;
        Ok(Json(serde_json::json!({ "run": run, "answered": id })))
    })
    .await
    .map_err(JsonFailure)
}

/// `POST /runs/RUN/stop`: stops a run this server started, as Ctrl-C would (resumable).
async fn stop_run(
    State(app): State<Arc<App>>,
    UrlPath(run): UrlPath<String>,
) -> Result<Json<serde_json::Value>, JsonFailure> {
    let run = run_id(&run)?;
    if app.procs.state(&run).is_none() {
        return Err(Failure(
            StatusCode::CONFLICT,
            format!("run {run} was not started by this server; stop it where it runs"),
        )
        .into());
    }
    let a = app.clone();
    let id = run.clone();
    let state = blocking(move || {
        a.procs
            .stop(&id, Duration::from_secs(10))
            .map_err(Failure::server)
    })
    .await?;
    Ok(Json(serde_json::json!({ "run": run, "process": state })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_told_apart() {
        let mut h = HeaderMap::new();
        for (host, ok) in [
            ("127.0.0.1:8780", true),
            ("localhost:1", true),
            ("[::1]:80", true),
            ("127.1.2.3", true),
            ("evil.example:8780", false),
            ("127.0.0.1.evil.example", false),
            ("", false),
        ] {
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            assert_eq!(host_is_loopback(&h), ok, "{host}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!same(b"abcdefghijklmnop", b"abcdefghijklmnoq"));
        assert!(!same(b"abc", b"abcd"));
    }
}
