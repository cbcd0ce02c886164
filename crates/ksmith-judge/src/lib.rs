//! ksmith-judge
