//! Frame bytes → the XDP path's reading and writing of frames; see src/fuzzing.rs.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| clusterset_dns::fuzzing::frame(data));
