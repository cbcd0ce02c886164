//! One agent session, as every node of a graph search runs it (every agent run is a search;
//! `optimize --model` without `--strategy` is the loop): what the agents are told ([`brief`], and as typed per-role
//! contexts, [`context`]), the one journaled provider and ask rule ([`journal`]), the
//! optional stages injected as small traits, autotune, profile and review ([`stages`]), and
//! the run's stored settings and review interface ([`state`]). Search-specific parts (the
//! node expander, dedup, the engine) are `ksmith-search`'s; printing is the CLI's.

pub mod brief;
pub mod context;
pub mod journal;
pub mod stages;
pub mod state;
