//! SEARCH/REPLACE edits and full-file replies.
