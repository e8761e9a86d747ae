//! Verifier (filled in by the verifier work).
