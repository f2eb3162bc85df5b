//! Fuzz the engine daemon's control requests (JSON: submit, status, wait, stop, list). The
//! daemon runs no pipeline (its limit is zero), so a submit is parsed and checked against the
//! registry and the budget, then refused. No request may panic, and every reply is JSON with
//! an `ok` field.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use offhost_node::daemon::Daemon;
use offhost_engine::EngineConfig;
use offhost_node::DaemonLimits;

fn daemon() -> &'static Arc<Daemon> {
    static D: OnceLock<Arc<Daemon>> = OnceLock::new();
    D.get_or_init(|| {
        let limits = DaemonLimits {
            pipelines: 0,
            ..DaemonLimits::default()
        };
        Daemon::with_limits(
            offhost_pet::tasks::registry(),
            EngineConfig::default(),
            limits,
        )
    })
}

fuzz_target!(|data: &[u8]| {
    let reply = daemon().answer(data);
    let v: serde_json::Value = serde_json::from_str(&reply).expect("the reply is JSON");
    assert!(v["ok"].is_boolean(), "{reply}");
});
