//! The HTML of `ksmith serve`'s pages, rendered on the server from the same JSON documents the
//! commands print (`runs --json`, `evals --json`, `show --json`) and from [`RunState`]. Every
//! value that came from a run, a model or a candidate goes through `escape::html`; the pages
//! carry no inline script or style (the CSP forbids both), only `/static/app.js` and
//! `/static/app.css`.

use super::live::{NodeView, RunState};
use axum::http::StatusCode;
use ksmith_task::escape::html;
use serde_json::Value;
use std::fmt::Write;

/// A JSON value as page text: strings as they are, numbers and booleans printed, null empty.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A speedup for a table cell.
fn speed(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}x"))
}

/// The page around `body`. `run` marks a run's page for the script (which then streams it).
fn layout(title: &str, run: Option<&str>, body: &str) -> String {
    let run_attr = run.map_or(String::new(), |r| format!(r#" data-run="{}""#, html(r)));
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="/static/app.css">
<script src="/static/app.js" defer></script>
</head><body{run_attr}>
<nav><a href="/">runs</a> · <a href="/evals">evaluations</a> · <span class="muted">ksmith serve</span></nav>
<main>
{body}
</main></body></html>
"#,
        title = html(title),
    )
}

/// An error page.
pub(crate) fn error_page(code: StatusCode, msg: &str) -> String {
    layout(
        &format!("ksmith: {}", code.as_u16()),
        None,
        &format!(
            "<h1>{}</h1><pre class=\"error\">{}</pre>",
            code.as_u16(),
            html(msg)
        ),
    )
}

/// `/`: the runs (`ksmith runs --json`) and the form that starts one.
pub(crate) fn runs_page(runs: &Value) -> String {
    let mut b = String::from("<h1>Runs</h1>\n");
    let rows = runs["runs"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        b.push_str("<p class=\"muted\">no runs yet</p>\n");
    } else {
        b.push_str("<table id=\"runs\"><thead><tr><th>run</th><th>created</th><th>task</th><th>model</th><th>mode</th><th>status</th><th>calls</th><th>best</th><th>why</th></tr></thead><tbody>\n");
        for r in &rows {
            let id = text(&r["id"]);
            let _ = writeln!(
                b,
                "<tr><td><a href=\"/runs/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"status-{st}\">{st}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                html(&text(&r["created_at"])),
                html(&text(&r["task"])),
                html(&text(&r["model"])),
                html(&text(&r["mode"])),
                html(&text(&r["calls"])),
                speed(r["best_speedup"].as_f64()),
                html(&text(&r["stop_reason"])),
                id = html(&id),
                st = html(&text(&r["status"])),
            );
        }
        b.push_str("</tbody></table>\n");
    }
    b.push_str(
        r#"<h2>Start a run</h2>
<form id="start">
<label>task directory <input name="task" required placeholder="tasks/starter/softmax"></label>
<label>model <input name="model" required placeholder="anthropic:claude-sonnet-4-5"></label>
<label>start from <input name="from" placeholder="(the task's first solution)"></label>
<label>strategy <select name="strategy"><option value="">agent loop</option><option>loop</option><option>best-of-n</option><option>parallel</option><option>beam</option><option>greedy</option><option>evolve</option></select></label>
<label>iterations (agent loop) <input name="iterations" type="number" min="0" max="1000"></label>
<label>max nodes (search) <input name="max_nodes" type="number" min="1"></label>
<label><input name="interactive" type="checkbox"> interactive: wait for my review at each step (agent loop)</label>
<button type="submit">start</button>
<p id="start-result" class="muted"></p>
</form>
"#,
    );
    layout("ksmith runs", None, &b)
}

/// `/evals`: stored evaluations (`ksmith evals --json`).
pub(crate) fn evals_page(evals: &Value) -> String {
    let mut b = String::from("<h1>Evaluations</h1>\n");
    let rows = evals.as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        b.push_str("<p class=\"muted\">no stored evaluations</p>\n");
    } else {
        b.push_str("<table id=\"evals\"><thead><tr><th>id</th><th>recorded (UTC)</th><th>task</th><th>solution</th><th>language</th><th>status</th><th>reason</th><th>speedup vs XLA</th></tr></thead><tbody>\n");
        for e in &rows {
            let id = text(&e["id"]);
            let _ = writeln!(
                b,
                "<tr><td><a href=\"/evals/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"status-{st}\">{st}</td><td>{}</td><td class=\"num\">{}</td></tr>",
                html(&text(&e["created_at"])),
                html(&text(&e["task"])),
                html(&text(&e["solution"])),
                html(&text(&e["language"])),
                html(&text(&e["reason"])),
                speed(e["speedup"].as_f64()),
                id = html(&id),
                st = html(&text(&e["status"])),
            );
        }
        b.push_str("</tbody></table>\n");
    }
    layout("ksmith evaluations", None, &b)
}

/// `/evals/ID`: one evaluation as `ksmith show ID --json` prints it.
pub(crate) fn eval_page(id: i64, v: &Value) -> String {
    let pretty = serde_json::to_string_pretty(v).unwrap_or_default();
    let r = &v["result"];
    let b = format!(
        "<h1>Evaluation {id}</h1>\n<p>{} · {} · <span class=\"status-{st}\">{st}</span> {}</p>\n<pre class=\"json\">{}</pre>\n",
        html(&text(&r["task"])),
        html(&text(&r["solution"])),
        html(&text(&r["reason"])),
        html(&pretty),
        st = html(&text(&r["status"])),
    );
    layout(&format!("ksmith evaluation {id}"), None, &b)
}

/// The nodes as an indented tree table.
fn nodes_table(nodes: &[NodeView]) -> String {
    if nodes.is_empty() {
        return "<p class=\"muted\">no node judged yet</p>".into();
    }
    let mut b = String::from("<table><thead><tr><th>node</th><th>status</th><th>speedup</th><th>hint</th><th>plan</th></tr></thead><tbody>");
    for n in nodes {
        let eval = n.eval_id.map_or(String::new(), |e| {
            format!(" <a href=\"/evals/{e}\" class=\"muted\">#{e}</a>")
        });
        let _ = write!(
            b,
            "<tr class=\"tone-{tone}\"><td class=\"depth-{depth}\">{}{eval}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            html(&n.label),
            html(&n.status),
            speed(n.speedup),
            html(&n.hint),
            html(&n.plan),
            tone = html(&n.tone),
            depth = n.depth.min(12),
        );
    }
    b.push_str("</tbody></table>");
    b
}

/// The final judgement and the winner written.
fn finals_html(s: &RunState) -> String {
    let mut b = String::new();
    if let Some(f) = &s.finals {
        let _ = write!(
            b,
            "<h2>Final judgement</h2><p id=\"final-summary\">{}</p>",
            html(&f.summary)
        );
        if !f.held_out.is_empty() {
            let _ = write!(
                b,
                "<p class=\"muted\">held-out shapes: {}</p>",
                html(&f.held_out)
            );
        }
        b.push_str("<table id=\"finalists\"><thead><tr><th>finalist</th><th>re-check</th><th>held out</th><th>vs XLA, together</th><th>vs incumbent</th><th>decision</th></tr></thead><tbody>");
        for r in &f.finalists {
            let fig = |x: &Option<ksmith_search::finalize::Figure>| {
                x.as_ref().map_or("-".to_string(), |x| {
                    format!("{:.2}x ({:.2}-{:.2})", x.speedup, x.low, x.high)
                })
            };
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                r.node,
                html(&r.status),
                html(r.held_out.as_deref().unwrap_or("-")),
                fig(&r.together),
                fig(&r.vs_incumbent),
                html(&r.decision),
            );
        }
        b.push_str("</tbody></table>");
    }
    if let Some(w) = &s.winner {
        let _ = write!(
            b,
            "<h2>{}</h2><p id=\"winner\">winner: <strong>{}</strong> {}</p>",
            if w.decided {
                "Winner written"
            } else {
                "Fastest so far"
            },
            html(&w.label),
            speed(w.speedup)
        );
        for (name, text) in &w.files {
            let _ = write!(
                b,
                "<details><summary>{}</summary><pre class=\"code\">{}</pre></details>",
                html(name),
                html(text)
            );
        }
    } else if s.finals.is_some() {
        b.push_str("<p id=\"winner\">no candidate held up: nothing was written</p>");
    }
    b
}

/// The pending review: what it shows and the answers it takes.
fn review_html(s: &RunState) -> String {
    let Some(r) = &s.review else {
        return String::new();
    };
    format!(
        r#"<h2>Review: {what} ({step})</h2>
<pre class="artifact">{shown}</pre>
<form id="review-form" data-review="{id}">
<textarea name="text" rows="8">{editable}</textarea>
<div class="buttons">
<button type="button" data-action="approve">approve</button>
<button type="button" data-action="edit">use my edit</button>
<button type="button" data-action="guidance">reject with guidance</button>
<button type="button" data-action="rerun">rerun</button>
<button type="button" data-action="stop">stop (resumable)</button>
</div>
<p class="muted" id="review-result">The box starts as the {what}: edit it and press “use my edit”, or replace it with guidance for the agent and press “reject with guidance”.</p>
</form>"#,
        what = html(&r.what),
        step = html(&r.step),
        shown = html(&r.shown),
        id = html(&r.id),
        editable = html(&r.editable),
    )
}

/// The node being expanded, its latest prompt and reply.
fn current_html(s: &RunState) -> String {
    let Some(c) = &s.current else {
        return String::new();
    };
    let mut b = format!(
        "<h2>Now</h2><p>{}{}</p>",
        c.node
            .map_or(String::new(), |n| format!("expanding n{n} · ")),
        html(s.stage.as_deref().unwrap_or("")),
    );
    if let Some(call) = &c.call {
        let _ = write!(
            b,
            "<details open><summary>call {} · {} · {}</summary><h3>prompt</h3><pre class=\"prompt\">{}</pre><h3>reply</h3><pre class=\"reply\">{}</pre>{}</details>",
            call.seq,
            html(&call.role),
            html(&call.step),
            html(&call.prompt),
            html(&call.reply),
            call.error
                .as_deref()
                .map_or(String::new(), |e| format!("<pre class=\"error\">{}</pre>", html(e))),
        );
    }
    b
}

/// The best-so-far curve as an SVG polyline (attributes only: no style, no script).
fn plot_svg(s: &RunState) -> String {
    let pts: Vec<(f64, f64)> = s
        .progress
        .iter()
        .filter(|p| p.wall_s.is_finite() && p.best.is_finite() && p.best > 0.0)
        .map(|p| (p.wall_s, p.best))
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let (w, h, pad) = (480.0, 160.0, 30.0);
    let t_max = pts.iter().map(|p| p.0).fold(1e-9, f64::max);
    let y_max = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let x = |t: f64| pad + (w - 2.0 * pad) * t / t_max;
    let y = |v: f64| h - pad - (h - 2.0 * pad) * v / y_max;
    let mut line = String::new();
    let mut prev: Option<f64> = None;
    for &(t, v) in &pts {
        // A step curve: the best holds until the next improvement.
        if let Some(p) = prev {
            let _ = write!(line, "{:.1},{:.1} ", x(t), y(p));
        }
        let _ = write!(line, "{:.1},{:.1} ", x(t), y(v));
        prev = Some(v);
    }
    format!(
        r##"<h2>Best so far</h2><svg class="plot" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="best speedup so far against wall seconds">
<line x1="{pad}" y1="{y1:.1}" x2="{x2}" y2="{y1:.1}" stroke="#999" stroke-dasharray="4 3"/>
<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{b}" stroke="#555"/><line x1="{pad}" y1="{b}" x2="{x2}" y2="{b}" stroke="#555"/>
<polyline points="{line}" fill="none" stroke="#1b7f3b" stroke-width="2"/>
<text x="{pad}" y="{ty}" font-size="11">{y_max:.2}x</text><text x="{x2}" y="{tb}" font-size="11" text-anchor="end">{t_max:.0} s</text>
</svg>"##,
        y1 = y(1.0),
        x2 = w - pad,
        b = h - pad,
        ty = pad - 6.0,
        tb = h - 8.0,
    )
}

/// The sections of a run's page, each a fragment of escaped HTML: the page is made of them,
/// and the `state` event carries them so the script swaps them in without rendering anything
/// itself (one renderer, one place where text is escaped).
#[derive(Debug, serde::Serialize)]
pub(crate) struct Sections {
    /// Task, model, mode, status and figures.
    pub head: String,
    /// The pending review, if any.
    pub review: String,
    /// The node being expanded with its latest call.
    pub current: String,
    /// The best-so-far plot.
    pub plot: String,
    /// The node tree.
    pub nodes: String,
    /// The final judgement and the winner.
    pub finals: String,
}

/// The sections of `s`.
pub(crate) fn sections(s: &RunState) -> Sections {
    let best = s
        .best
        .as_ref()
        .map_or("none passed yet".to_string(), |(l, x)| {
            format!("{} at {x:.2}x", html(l))
        });
    let head = format!(
        r#"<p id="summary">{task} · {model} · {mode} · <span id="status" class="status-{status}">{status}</span>{why}</p>
<p id="figures">best so far: <strong id="best">{best}</strong> · {calls} calls · {tokens} tokens · ${cost:.4} · {evals} evaluations</p>
<p><a href="/runs/{run}/report" id="report-link">HTML report</a>{stop}</p>"#,
        run = html(&s.run),
        task = html(&s.task),
        model = html(&s.model),
        mode = html(&s.mode),
        status = html(&s.status),
        why = s
            .stop_reason
            .as_deref()
            .map_or(String::new(), |w| format!(" · {}", html(w))),
        calls = s.calls,
        tokens = s.tokens,
        cost = s.cost,
        evals = s.evaluations,
        stop = if s.running {
            " · <button type=\"button\" id=\"stop\">stop the run</button>"
        } else {
            ""
        },
    );
    Sections {
        head,
        review: review_html(s),
        current: current_html(s),
        plot: plot_svg(s),
        nodes: nodes_table(&s.nodes),
        finals: finals_html(s),
    }
}

/// `/runs/RUN`: the run as it stands (the script swaps the sections in as the state changes).
pub(crate) fn run_page(s: &RunState) -> String {
    let x = sections(s);
    let b = format!(
        r#"<h1>{run}</h1>
<section id="head">{head}</section>
<section id="review" data-review="{review_id}">{review}</section>
<section id="current">{current}</section>
<section id="plot">{plot}</section>
<h2>Nodes</h2>
<section id="nodes">{nodes}</section>
<section id="finals">{finals}</section>
<h2>Engine events</h2>
<p id="live" class="muted">connecting…</p>
<ol id="events" class="events"></ol>
"#,
        run = html(&s.run),
        review_id = html(s.review.as_ref().map_or("", |r| r.id.as_str())),
        head = x.head,
        review = x.review,
        current = x.current,
        plot = x.plot,
        nodes = x.nodes,
        finals = x.finals,
    );
    layout(&format!("ksmith {}", s.run), Some(&s.run), &b)
}
