//! ksmith-cli
