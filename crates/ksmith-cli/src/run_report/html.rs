//! The page: one HTML file with its CSS and SVG inline and no script at all. A
//! Content-Security-Policy forbids scripts and every fetch, so even text that escaped
//! escaping could neither run nor call out. All candidate text (plans, summaries, sources,
//! diffs, statuses) goes through [`html`].

use super::plot::{self, Axis};
use super::tree;
use ksmith_results::run::ReportData;
use ksmith_task::escape::html;
use std::fmt::Write;

const STYLE: &str = r#"
body { margin: 0; font-family: sans-serif; color: #222; background: #fff; }
header { height: 64px; box-sizing: border-box; padding: 10px 16px; background: #f3f5f8; border-bottom: 1px solid #ccd; overflow: hidden; }
header h1 { font-size: 18px; margin: 0 0 4px 0; }
header p { margin: 0; font-size: 13px; color: #444; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
section { padding: 8px 16px; }
h2 { font-size: 16px; margin: 8px 0; }
#plots { height: 320px; box-sizing: border-box; display: flex; gap: 8px; overflow: hidden; }
#plots figure { margin: 0; }
#tree .scroll { overflow-x: auto; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px; border-radius: 4px; font-size: 12px; }
.legend .best { background: #1b7f3b; color: #fff; }
.legend .passed { background: #7cc48f; }
.legend .failed { background: #e07a6f; }
.legend .skipped { background: #b9b9b9; }
.legend .open { background: #8fb3e0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccd; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { background: #e4f3e8; }
.bar { display: inline-block; height: 10px; background: #1f5ea8; vertical-align: middle; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 8px; font-size: 12px; overflow-x: auto; }
pre .add { background: #e6ffec; display: block; }
pre .del { background: #ffebe9; display: block; }
pre .hunk { color: #6a4fb0; display: block; }
.warn { color: #8a4b00; }
"#;

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The whole page.
pub(crate) fn page(d: &ReportData) -> String {
    let r = &d.run;
    let mut s = String::with_capacity(64 * 1024);
    let best = d.winner.as_ref().map(|w| &d.nodes[w.node]);
    let best_text = match best {
        Some(n) => format!(
            "best {:.2}x at {}",
            n.speedup.unwrap_or(f64::NAN),
            html(&n.label)
        ),
        None => "no candidate passed".to_string(),
    };
    let _ = write!(
        s,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ksmith report {id}</title>
<style>{STYLE}</style></head><body>
<header><h1>ksmith report · {id} · {task}</h1>
<p>{kind} · {status} · {best_text} · {calls} calls · {tokens} tokens · ${cost:.4} · {wall:.1} s wall · model {model}</p></header>
"#,
        id = html(&r.id),
        task = html(&r.task),
        kind = d.kind.describe(),
        status = html(r.status.as_str()),
        calls = d.calls,
        tokens = d.tokens,
        cost = d.cost,
        wall = d.wall_s,
        model = html(&r.model),
    );

    s.push_str(r#"<section id="plots" aria-label="best speedup so far">"#);
    for axis in Axis::ALL {
        let svg = plot::best_so_far(&d.progress, axis).unwrap_or_else(|e| {
            format!(
                r#"<p class="warn">chart not drawn: {}</p>"#,
                html(&e.to_string())
            )
        });
        let _ = write!(s, r#"<figure id="{}">{svg}</figure>"#, axis.id());
    }
    s.push_str("</section>\n");

    let _ = writeln!(
        s,
        r#"<section id="tree"><h2>Search tree ({n} nodes)</h2><p class="legend"><span class="best">winner</span><span class="passed">passed</span><span class="failed">refused by the judge</span><span class="skipped">not judged</span><span class="open">unfinished</span></p><div class="scroll">{svg}</div></section>"#,
        n = d.nodes.len(),
        svg = tree::svg(&d.nodes)
    );

    s.push_str(r#"<section id="nodes"><h2>Nodes</h2><table><tr><th>node</th><th>parent</th><th>status</th><th>hint / summary</th><th class="num">speedup</th><th class="num">calls</th><th class="num">tokens</th><th class="num">evals</th><th class="num">ended (s)</th><th>plan</th></tr>"#);
    for n in &d.nodes {
        let parent = n
            .parent
            .and_then(|p| d.nodes.iter().find(|x| x.id == p))
            .map(|p| html(&p.label))
            .unwrap_or_default();
        let _ = write!(
            s,
            r#"<tr class="{cls}"><td>{label}</td><td>{parent}</td><td>{status}</td><td>{hint}</td><td class="num">{speed}</td><td class="num">{calls}</td><td class="num">{tokens}</td><td class="num">{evals}</td><td class="num">{at}</td><td>{plan}</td></tr>"#,
            cls = n.tone.class(),
            label = html(&n.label),
            status = html(&n.status),
            hint = html(&n.hint),
            speed = n.speedup.map(|v| format!("{v:.2}x")).unwrap_or_default(),
            calls = n.calls,
            tokens = n.tokens,
            evals = n.evaluations,
            at = n.at_s.map(|v| format!("{v:.1}")).unwrap_or_default(),
            plan = html(&n.plan),
        );
    }
    s.push_str("</table></section>\n");

    winner_section(&mut s, d);
    finalists_section(&mut s, d);
    cost_section(&mut s, d);

    if !d.warnings.is_empty() {
        s.push_str(r#"<section id="warnings"><h2>Not shown</h2><ul>"#);
        for w in &d.warnings {
            let _ = write!(s, r#"<li class="warn">{}</li>"#, html(w));
        }
        s.push_str("</ul></section>\n");
    }
    s.push_str("</body></html>\n");
    s
}

/// The final judgement: every finalist re-checked on fresh seeds and held-out shapes and
/// re-timed together, its decision against the incumbent, and how the winner was chosen.
fn finalists_section(s: &mut String, d: &ReportData) {
    let Some(f) = &d.finals else { return };
    s.push_str(r#"<section id="finalists"><h2>Finalists, re-checked and re-timed together</h2>"#);
    let _ = write!(
        s,
        "<p>{}</p><p>Held-out shapes: {}.</p>",
        html(&f.summary),
        html(&f.held_out)
    );
    if !f.finalists.is_empty() {
        s.push_str(r#"<table><tr><th class="num">node</th><th>status</th><th>held-out</th><th class="num">together vs XLA (95%)</th><th class="num">vs the incumbent (95%)</th><th>decision</th></tr>"#);
        for r in &f.finalists {
            let _ = write!(
                s,
                r#"<tr><td class="num">{}{}</td><td>{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>"#,
                r.node,
                if f.node == Some(r.node) {
                    " (winner)"
                } else {
                    ""
                },
                html(&r.status),
                html(r.held_out.as_deref().unwrap_or("-")),
                r.together.map_or("-".into(), |x| x.text()),
                r.vs_incumbent.map_or("-".into(), |x| x.text()),
                html(&r.decision)
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>\n");
}

fn winner_section(s: &mut String, d: &ReportData) {
    s.push_str(if d.finals.is_some() {
        r#"<section id="winner"><h2>Winning kernel (the one written)</h2>"#
    } else {
        r#"<section id="winner"><h2>Best kernel so far (no final judgement recorded)</h2>"#
    });
    let Some(w) = &d.winner else {
        s.push_str(if d.finals.is_some() {
            "<p>No finalist held up on fresh seeds and the held-out shapes: nothing was written.</p></section>\n"
        } else {
            "<p>No candidate passed and was timed.</p></section>\n"
        });
        return;
    };
    let n = &d.nodes[w.node];
    let _ = write!(
        s,
        "<p>{} · {:.2}x · roofline {} · diff from {}</p>",
        html(&n.label),
        n.speedup.unwrap_or(f64::NAN),
        w.roofline
            .map(|f| format!("{:.1}%", f * 100.0))
            .unwrap_or_else(|| "unknown".into()),
        html(&w.start_label),
    );
    if !w.workloads.is_empty() {
        s.push_str(r#"<table id="roofline"><tr><th class="num">workload</th><th>axes</th><th class="num">speedup</th><th class="num">median ms</th><th class="num">GFLOP/s</th><th class="num">GB/s</th><th>roofline fraction</th></tr>"#);
        for wl in &w.workloads {
            let pct = (wl.roofline * 100.0).clamp(0.0, 100.0);
            // A kernel that beat its floor is flagged, never shown as a plain full bar.
            let beyond = wl
                .beyond
                .as_ref()
                .map(|(f, what)| {
                    format!(
                        " <strong>beyond the floor: {:.0}%, {}</strong>",
                        f * 100.0,
                        html(what)
                    )
                })
                .unwrap_or_default();
            let _ = write!(
                s,
                r#"<tr><td class="num">{}</td><td>{}</td><td class="num">{:.2}x</td><td class="num">{:.4}</td><td class="num">{}</td><td class="num">{}</td><td><span class="bar" style="width:{:.0}px"></span> {:.1}%{beyond}</td></tr>"#,
                wl.index,
                html(&wl.axes),
                wl.speedup,
                wl.median_ms,
                num(wl.gflops),
                num(wl.gbps),
                pct * 2.0,
                wl.roofline * 100.0
            );
        }
        s.push_str("</table>");
    }
    for f in &w.files {
        let diff = similar::TextDiff::from_lines(&f.start, &f.text)
            .unified_diff()
            .context_radius(3)
            .header(&format!("start/{}", f.name), &format!("winner/{}", f.name))
            .to_string();
        let _ = write!(
            s,
            "<h3>{} — diff from the start</h3><pre class=\"diff\">",
            html(&f.name)
        );
        if diff.is_empty() {
            s.push_str("(unchanged)");
        }
        for line in diff.lines() {
            let cls = if line.starts_with("@@") {
                "hunk"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else {
                ""
            };
            if cls.is_empty() {
                let _ = writeln!(s, "{}", html(line));
            } else {
                let _ = write!(s, r#"<span class="{cls}">{}</span>"#, html(line));
            }
        }
        let _ = write!(
            s,
            "</pre><h3>{} — the winner</h3><pre class=\"source\">{}</pre>",
            html(&f.name),
            html(&f.text)
        );
    }
    s.push_str("</section>\n");
}

fn cost_section(s: &mut String, d: &ReportData) {
    s.push_str(r#"<section id="cost"><h2>Cost</h2><table><tr><th>role</th><th class="num">calls</th><th class="num">tokens in</th><th class="num">tokens out</th><th class="num">USD</th></tr>"#);
    for r in &d.roles {
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{:.4}</td></tr>"#,
            html(&r.role),
            r.calls,
            r.tokens_in,
            r.tokens_out,
            r.cost
        );
    }
    let _ = writeln!(
        s,
        r#"<tr><th>total</th><th class="num">{}</th><th class="num" colspan="2">{} tokens</th><th class="num">{:.4}</th></tr></table><p>{} evaluations · {:.1} s wall</p></section>"#,
        d.calls, d.tokens, d.cost, d.evaluations, d.wall_s
    );
}
