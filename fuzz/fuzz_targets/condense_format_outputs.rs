#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| condense::check_format_outputs(data));
