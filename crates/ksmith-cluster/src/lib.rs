//! Scale-out: the judge's device slots on a Ray cluster (docs/cluster.md).
//!
//! `client.rs` speaks protocol `ksmith-cluster/2` with the Python driver
//! (`harness/ksmith_harness/cluster_driver.py`), which holds one Ray actor per device; each
//! actor runs `ksmith worker judge` on its node. `worker.rs` is that worker's side: requests
//! in, the judge's typed results out. `local.rs` starts a real Ray cluster on this machine
//! (a head and worker nodes) for tests and benchmarks.

pub mod client;
pub mod local;
pub mod protocol;
pub mod worker;
