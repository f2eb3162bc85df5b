//! Engine-to-engine queues: `engine-out` carries the buffers of a queue to `host-in` of a
//! pipeline on another engine, over a link session the engine opens itself.
//!
//! A queue whose writer and reader are placed on different engines (`@NAME`, see
//! [`crate::placement`]) becomes, on the writer's engine, `engine-out url=URL pipeline=ID
//! name=Q <Q` and, on the reader's, `host-in name=Q whole=true >Q:POOL`. Each buffer crosses
//! whole on channel `in/ID/Q` (as one message, or as several with a one-byte header when it is
//! larger than a message) and arrives as one buffer, so the link's credit flow control carries the closed loop
//! across: the receiving `host-in` copies a message into a buffer of its free list only when
//! one is free, its daemon reads the channel only when `host-in` has room, the channel grants
//! credit only as it is read, and a blocked send holds the sender's buffers, so its free list
//! stalls its producer. Memory stays bounded end to end.
//!
//! The link is the engine's own: `tls:` with the engine's certificate directory (the other
//! engine must hold a certificate of the same CA). Which URLs a pipeline may reach is the
//! engine's [`Links`]: a pipeline from outside reaches `tls:` URLs only (`tcp:` as well when
//! the engine runs `--insecure`), never a local socket.
//!
//! Failure is whole: if the link breaks, `engine-out` fails its pipeline with an error naming
//! the engine it was sending to, and the receiving daemon fails the reading pipeline (a cut
//! stream is never taken for a complete one, see [`offhost_engine::HostInput::fail`]).
//!
//! Files: `engine_out.rs` (the task), `link_task.rs` (what it shares with `call`), `calls/`
//! (calls between engines).

use std::sync::Arc;

use offhost_engine::{Args, Build, Priority, Registry, TaskInfo};

pub use crate::link_task::{Links, ReachError};

/// Registers `engine-out` and `call` (see [`crate::calls`]) over those of `r`, reaching
/// engines as `links` allows.
pub fn register(r: &mut Registry, links: Links) {
    let links = Arc::new(links);
    crate::calls::client::register(r, Arc::clone(&links));
    r.register(
        TaskInfo::new(
            "engine-out",
            "sends each buffer of its input to host-in NAME of pipeline ID on the engine at URL (an engine-to-engine queue)",
        )
        .required("url", "the other engine's URL (tls:HOST:PORT)")
        .required(
            "pipeline",
            "the pipeline's id on that engine, or the name it was submitted with",
        )
        .required("name", "its host-in channel")
        .arg("engine", "", "the other engine's name, for errors")
        .inputs(1, 1)
        .outputs(0, 0)
        .priority(Priority::Interrupt),
        move |args: &Args, b: &mut Build<'_>| crate::engine_out::factory(&links, args, b),
    );
}
