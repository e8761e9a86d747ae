#![no_main]
//! See `lnc_fuzz::front` and fuzz/README.md.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| lnc_fuzz::front(data));
