//! What the agents are told: the loop's state rendered by the engine's brief
//! (`ksmith_search::agent::brief`), which every front end and the search share.

use super::iterate::{Judged, State};
use serde_json::Value;

pub(super) use ksmith_search::agent::brief::{
    first_lines, load_average, machine_line, timing_text,
};

pub(super) fn task_brief(st: &State) -> Value {
    ksmith_search::agent::brief::task_brief(&st.task, &st.entry, st.language)
}

pub(super) fn roofline_text(st: &State) -> String {
    ksmith_search::agent::brief::roofline_text(&st.hw)
}

/// The failure of a judged candidate as the fixer needs it.
pub(super) fn failure(j: &Judged) -> (&'static str, String) {
    ksmith_search::agent::brief::failure(&j.result)
}
