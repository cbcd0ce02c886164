//! ksmith-store
