//! What runs decided and how two runs compare, apart from how the CLI prints them: the report
//! written beside a run's winner ([`written`]), the per-task verdicts of `ksmith compare`
//! ([`compare`]) a bench suite's metrics ([`suite`]) and an agent run as its HTML report and `ksmith serve`'s page
//! show it ([`run`]: nodes or snapshots, best-so-far curves, winner, cost per role). Pure functions of stored results, tested here without a judge.

pub mod compare;
pub mod run;
pub mod suite;
pub mod written;
