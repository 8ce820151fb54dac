#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| notebook_model::check_parse_write(data));
