//! LLM providers behind one small trait.
