//! A real Ray cluster on this machine (a head and worker nodes), for tests and benchmarks.
