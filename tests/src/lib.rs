//! lnc test suite (tests live in `tests/*.rs`).
