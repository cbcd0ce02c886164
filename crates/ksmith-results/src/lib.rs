//! What runs decided and how two runs compare, apart from how the CLI prints them: the report
//! written beside a run's winner ([`written`]) and the per-task verdicts of `ksmith compare`
//! ([`compare`]). Pure functions of stored results, tested here without a judge.

pub mod compare;
pub mod written;
