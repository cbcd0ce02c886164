//! ksmith-harness
