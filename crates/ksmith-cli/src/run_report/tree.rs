//! The search tree as inline SVG: roots at the top, each node one row below its parent, leaves
//! side by side and a parent centred over its children; boxes coloured by outcome. A serial
//! run is a chain (one column).

use ksmith_results::run::ReportNode;
use ksmith_task::escape::html;
use std::collections::BTreeMap;
use std::fmt::Write;

const BOX_W: f64 = 180.0;
const BOX_H: f64 = 46.0;
const COL_W: f64 = 200.0;
const ROW_H: f64 = 76.0;
const PAD: f64 = 10.0;

/// The tree's SVG (empty string when there are no nodes).
pub(crate) fn svg(nodes: &[ReportNode]) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let index: BTreeMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    let mut children: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut roots = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        match n.parent.and_then(|p| index.get(&p)) {
            Some(&p) if p != i => children.entry(p).or_default().push(i),
            // A parent that is not stored (lost in flight) makes its child a root.
            _ => roots.push(i),
        }
    }
    for c in children.values_mut() {
        c.sort_by_key(|&i| nodes[i].id);
    }
    let mut pos: Vec<Option<(f64, u32)>> = vec![None; nodes.len()];
    let mut next_leaf = 0.0;
    for &r in &roots {
        place(r, 0, &children, &mut pos, &mut next_leaf);
    }
    // Nodes never reached from a root (a parent cycle) go in a row of their own at the end.
    let depth_max = pos.iter().flatten().map(|p| p.1).max().unwrap_or(0);
    for p in pos.iter_mut().filter(|p| p.is_none()) {
        *p = Some((next_leaf, depth_max + 1));
        next_leaf += 1.0;
    }
    let pos: Vec<(f64, u32)> = pos.into_iter().flatten().collect();
    let width = next_leaf.max(1.0) * COL_W + 2.0 * PAD;
    let rows = pos.iter().map(|p| p.1).max().unwrap_or(0) + 1;
    let height = f64::from(rows) * ROW_H + 2.0 * PAD;
    let xy = |i: usize| {
        let (col, depth) = pos[i];
        (
            PAD + col * COL_W + (COL_W - BOX_W) / 2.0,
            PAD + f64::from(depth) * ROW_H,
        )
    };
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="tree-svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="search tree">"#
    );
    for (&p, cs) in &children {
        let (px, py) = xy(p);
        for &c in cs {
            let (cx, cy) = xy(c);
            let _ = write!(
                s,
                r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#555" stroke-width="1.5"/>"##,
                px + BOX_W / 2.0,
                py + BOX_H,
                cx + BOX_W / 2.0,
                cy
            );
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        let (x, y) = xy(i);
        let speed = n
            .speedup
            .map(|v| format!("{v:.2}x"))
            .unwrap_or_else(|| n.status.clone());
        let hint: String = n.hint.chars().take(24).collect();
        let more = if n.hint.chars().count() > 24 {
            "…"
        } else {
            ""
        };
        let _ = write!(
            s,
            r##"<g class="node {cls}"><title>{title}</title><rect x="{x:.1}" y="{y:.1}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" stroke="#333"/><text x="{tx:.1}" y="{t1:.1}" font-size="13" font-weight="bold">{label} · {speed}</text><text x="{tx:.1}" y="{t2:.1}" font-size="12">{hint}{more}</text></g>"##,
            cls = n.tone.class(),
            title = html(&format!(
                "{} ({}): {}{}{}",
                n.label,
                n.status,
                n.hint,
                if n.plan.is_empty() { "" } else { "\n" },
                n.plan
            )),
            fill = n.tone.fill(),
            tx = x + 8.0,
            t1 = y + 19.0,
            t2 = y + 37.0,
            label = html(&n.label),
            speed = html(&speed),
            hint = html(&hint),
        );
    }
    s.push_str("</svg>");
    s
}

/// Lays out `i`'s subtree: leaves take the next column, a parent sits over its children.
fn place(
    i: usize,
    depth: u32,
    children: &BTreeMap<usize, Vec<usize>>,
    pos: &mut Vec<Option<(f64, u32)>>,
    next_leaf: &mut f64,
) {
    if pos[i].is_some() {
        return;
    }
    // Marked before the children so a cycle cannot recurse forever.
    pos[i] = Some((*next_leaf, depth));
    let kids: Vec<usize> = children
        .get(&i)
        .map(|c| c.iter().copied().filter(|&c| pos[c].is_none()).collect())
        .unwrap_or_default();
    if kids.is_empty() {
        *next_leaf += 1.0;
        return;
    }
    for &c in &kids {
        place(c, depth + 1, children, pos, next_leaf);
    }
    let first = pos[kids[0]].map_or(0.0, |p| p.0);
    let last = pos[kids[kids.len() - 1]].map_or(0.0, |p| p.0);
    pos[i] = Some(((first + last) / 2.0, depth));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksmith_results::run::Tone;

    fn node(id: u64, parent: Option<u64>, hint: &str) -> ReportNode {
        ReportNode {
            id,
            parent,
            label: format!("n{id}"),
            status: "PASSED".into(),
            tone: Tone::Passed,
            hint: hint.into(),
            plan: String::new(),
            speedup: Some(1.0 + id as f64 / 10.0),
            at_s: None,
            calls: 0,
            tokens: 0,
            evaluations: 0,
            eval_id: None,
            sources: Vec::new(),
        }
    }

    #[test]
    fn a_tree_has_one_edge_per_parent_link_and_escapes_node_text() {
        let nodes = vec![
            node(0, None, "first_kernel"),
            node(1, Some(0), "tile"),
            node(2, Some(0), "</text><script>alert(1)</script>"),
            node(3, Some(1), "fuse"),
            node(4, Some(3), "a"),
            // A cycle stays finite.
            node(5, Some(6), "x"),
            node(6, Some(5), "y"),
        ];
        let s = svg(&nodes);
        assert_eq!(s.matches("<line").count(), 6, "{s}");
        assert_eq!(s.matches("<rect").count(), 7);
        assert!(!s.contains("<script"), "{s}");
        assert!(s.contains("1.30x"));
    }
}
