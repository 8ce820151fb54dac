#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| transfer::check_reply_parsing(data));
