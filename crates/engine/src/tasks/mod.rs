//! The built-in tasks.
//!
//! Audio tasks work on 16-bit signed little-endian PCM, interleaved when there are several
//! channels. Sources allocate from the free list of their output (or a default one); sinks
//! finish at end of stream.

mod audio;
mod bytes;
pub mod convert;
pub mod g711;
mod host_ports;
mod level;
pub mod rate;
mod wav;

use crate::registry::{Registry, TaskInfo};
use crate::task::Priority;

impl Registry {
    /// A registry holding the built-in tasks.
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        register_builtins(&mut r);
        r
    }
}

fn register_builtins(r: &mut Registry) {
    r.register_put_hook(
        "log",
        "logs the queue's name each time a buffer lands on it while it was empty",
        crate::hooks::log_hook,
    );
    r.register_get_hook(
        "status",
        "hands the reader of the empty queue a line of JSON: the pipeline's statistics at that moment",
        crate::hooks::status_hook,
    );
    audio::register(r);
    bytes::register(r);
    level::register(r);
    rate::register(r);
    wav::register(r);
    crate::call::register(r);
    r.register(
        TaskInfo::new(
            "host-in",
            "bytes the host sends on a channel (see Running::host_input)",
        )
        .required("name", "channel name")
        .arg(
            "whole",
            "false",
            "buffers cross whole: each message starts with a byte, 1 while more parts of a buffer follow, 0 on its last; the parts join into one buffer (engine-out's framing)",
        )
        .inputs(0, 0)
        .allocates(16, 65536)
        .priority(Priority::Interrupt),
        host_ports::host_in_factory,
    );
    r.register(
        TaskInfo::new(
            "host-out",
            "buffers handed to the host on a channel (see Running::host_output)",
        )
        .required("name", "channel name")
        .arg(
            "whole",
            "false",
            "buffers cross a link whole: each message starts with a byte, 1 while more parts of a buffer follow, 0 on its last (what a call task reads)",
        )
        .outputs(0, 0)
        .priority(Priority::Interrupt),
        host_ports::host_out_factory,
    );
}
