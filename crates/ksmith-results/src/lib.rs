//! What runs decided and how two runs compare, apart from how the CLI prints them: the report
//! written beside a run's winner ([`written`]), the per-task verdicts of `ksmith compare`
//! ([`compare`]) and a bench suite's metrics ([`suite`]). Pure functions of stored results, tested here without a judge.

pub mod compare;
pub mod suite;
pub mod written;
