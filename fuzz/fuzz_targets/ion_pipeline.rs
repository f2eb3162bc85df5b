//! Fuzz the pipeline language: parsing and checking `.ion` text against every task the
//! engine and the PET crate register, within the default budget. No text may panic, and none
//! may allocate past the budget: `scripts/fuzz` runs this target with `-malloc_limit_mb=256`,
//! so one allocation over 256 MiB while a pipeline is checked (a task sizing a buffer from an
//! argument, as `mix channels=4294967295` did with 8 GiB) is a crash. Nothing
//! runs, and the tasks get no file access ([`Files::Denied`], as a submitted pipeline on a
//! daemon without `--files`): checking builds the tasks but opens no file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_engine::{Budget, Files, Pipeline};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = Pipeline::parse(text) else {
        return;
    };
    let registry = offhost_pet::tasks::registry();
    if let Ok(built) = p.build_within(&registry, &Files::Denied, &Budget::default()) {
        assert!(built.pool_bytes() <= Budget::default().pool_bytes);
    }
});
