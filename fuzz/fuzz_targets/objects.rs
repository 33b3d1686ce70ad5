//! File bytes → objects → zone → answers; see src/fuzzing.rs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| clusterset_dns::fuzzing::objects(data));
