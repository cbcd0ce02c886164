//! ksmith-sandbox
