#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| execution_tracker::check_event_sequence(data));
