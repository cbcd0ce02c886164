//! Agents: role prompts, reply parsers, code edits.

pub mod edit;
