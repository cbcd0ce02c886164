//! ksmith-backend
