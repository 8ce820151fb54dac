#![no_main]

libfuzzer_sys::fuzz_target!(
    init: {
        // Ruff's parser panics on some invalid IPython input (astral-sh/ruff#21705); dataflow
        // catches that panic and reports an analysis failure. libFuzzer's hook would abort on it
        // before the catch, so panics raised inside the parser are let through to be caught.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_parser = info
                .location()
                .is_some_and(|location| location.file().contains("ruff_python_parser"));
            if !in_parser {
                abort(info);
            }
        }));
    },
    |data: &[u8]| dataflow::check_python_dataflow(data)
);
