//! The offhost engine: filter tasks joined by queues, closed-loop buffer pools,
//! the pipeline description language and the built-in tasks.
#![forbid(unsafe_code)]
