#![no_main]
//! See `lnc_fuzz::parse` and fuzz/README.md.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lnc_fuzz::parse(data));
