//! The knowledge corpus: BM25 retrieval over our docs and the user's.
