#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| colab_setup::check_setup_sequence(data));
