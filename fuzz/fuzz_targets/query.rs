//! Query bytes → response bytes (UDP and TCP) and the transfer path; see src/fuzzing.rs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| clusterset_dns::fuzzing::query(data));
