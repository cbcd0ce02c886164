//! The planner template's `memory` section: rendered when entries are given, absent otherwise.

use ksmith_agents::{Prompts, Role};
use serde_json::json;

fn task() -> serde_json::Value {
    json!({"name": "softmax", "description": "Row softmax.", "language": "c", "device": "cpu",
           "signature": "void softmax(const float* x, float* y, int64_t M, int64_t N);",
           "workloads": ["M=2000 N=600"], "tolerance": "atol 1e-6, rtol 2e-4", "fence": "c"})
}

#[test]
fn the_planner_shows_memory_entries_only_when_given() {
    let p = Prompts::load(None).unwrap();
    let without = p
        .render(Role::Planner, &json!({"task": task(), "mode": "new"}))
        .unwrap();
    assert!(!without.user.contains("What worked on other tasks"));
    let entry = json!({"id": 3, "op_class": "normalization", "task": "layernorm",
        "hint": "vectorize", "headline": "Vectorize the row loop", "gain": "1.28x (1.20-1.36)",
        "device": "Test CPU", "shown": 4, "wins": 1, "excerpt": "- naive();\n+ vec();"});
    let with = p
        .render(
            Role::Planner,
            &json!({"task": task(), "mode": "new", "memory": [entry.clone()]}),
        )
        .unwrap();
    let u = &with.user;
    assert!(u.contains("## What worked on other tasks"), "{u}");
    assert!(
        u.contains("- [normalization, vectorize] Vectorize the row loop: 1.28x (1.20-1.36) faster than the kernel it changed, on layernorm (Test CPU); followed by a faster kernel 1 of 4 times shown"),
        "{u}"
    );
    assert!(u.contains("```diff\n- naive();\n+ vec();\n```"), "{u}");
    let mut fresh = entry.clone();
    fresh["shown"] = json!(0);
    fresh["wins"] = json!(0);
    let r = p
        .render(
            Role::Planner,
            &json!({"task": task(), "mode": "new", "memory": [fresh]}),
        )
        .unwrap();
    assert!(r.user.contains("on layernorm (Test CPU)\n"), "{}", r.user);
    assert!(
        !r.user.contains("followed by a faster kernel 0"),
        "never shown: no win count"
    );
    let empty = p
        .render(
            Role::Planner,
            &json!({"task": task(), "mode": "new", "memory": []}),
        )
        .unwrap();
    assert!(!empty.user.contains("What worked on other tasks"));
}
