//! Shared-memory layer of offhost: segments, single-producer single-consumer rings, a buffer
//! pool, doorbells and peer liveness. This is the only crate of the workspace that uses `unsafe`.
//!
//! # The link
//!
//! A link joins two sides: the **host**, which creates the segment and connects, and the
//! **engine**, which listens and attaches. The host creates a sealed, owner-only memfd, lays out
//! the segment in it ([`Layout`]) and hands it to the engine over a Unix socket (SCM_RIGHTS).
//! The engine validates the header (magic, version, every layout size) and answers with a
//! verdict; a mismatch is an [`AttachError`] that names the field, the expected and the found
//! value, on both sides. The socket then stays open and silent as the control connection: when
//! either process exits or dies, the other sees end of file, and a waiting side returns
//! [`ShmError::PeerGone`] within [`LIVENESS`] (100 ms slices, well under a second);
//! [`Endpoint::check_peer`] probes without waiting.
//!
//! ```
//! # fn main() -> Result<(), offhost_shm::ShmError> {
//! use offhost_shm::{connect, Config, Listener};
//! use std::time::Duration;
//!
//! // engine process
//! let addr = format!("@offhost-doc-{}", std::process::id()); // or a socket path
//! let listener = Listener::bind(&addr)?;
//! std::thread::spawn(move || offhost_shm::echo(listener.accept().unwrap()));
//!
//! // host process
//! let mut ep = connect(&addr, &Config::default())?;
//! ep.sender().send(b"hello", Some(Duration::from_secs(1)))?;
//! let rec = ep.receiver().recv(Some(Duration::from_secs(1)))?;
//! assert_eq!(rec.bytes(), b"hello");
//! # Ok(()) }
//! ```
//!
//! # Segment
//!
//! `[control block | ring host->engine | ring engine->host | free ring 0 | free ring 1 | pool]`.
//! The control block is `#[repr(C)]`: the header, then each ring's `tail` and `head` on their
//! own cache lines, then four doorbell words (host rx, host tx, engine rx, engine tx), each on
//! its own line. Only offsets and indices live in shared memory, never pointers.
//!
//! # Records
//!
//! Each direction has one SPSC ring of variable-length records (16-byte header, padded to 16
//! bytes; a record never wraps). A record is published by a stamp in its header (its position
//! plus one), so a waiting receiver polls the one cache line the next record will be in.
//! A record is either **inline** (its bytes are in the ring; at most [`Sender::max_record`] =
//! `ring_bytes / 2 - 16` bytes, larger is [`ShmError::RecordTooLarge`] at the call) or a
//! **descriptor** of a pool buffer (index, offset, length). Records are read in place:
//! [`Receiver::recv`] returns a [`Record`] that borrows the ring and is consumed when dropped.
//!
//! Publication is batched: [`Sender::write`], [`Sender::write_with`] and [`Sender::write_buf`]
//! stage records; [`Sender::flush`] publishes them all with one store and at most one wake-up.
//! [`Sender::send`], [`Sender::send_batch`] and [`Sender::send_buf`] stage, wait for room if
//! needed, and flush.
//!
//! # Buffer pool and zero-copy
//!
//! The segment holds `2 * pool_buffers` buffers of `buffer_size` bytes; the first half is homed
//! at the host, the second at the engine. [`Sender::alloc`] takes a free buffer homed at this
//! side and returns a [`Buf`], writable in place, with a data range (offset, length) so headers
//! can be prepended without copying. [`Sender::send_buf`] sends it by descriptor; the receiver
//! gets it with [`Record::take_buf`] (or reads it through [`Record::bytes`]), may modify it,
//! forward it back with its own `send_buf`, or drop it. Dropping a `Buf` returns it to its home
//! pool whichever side drops it: directly if homed here, through the home side's free ring
//! otherwise. Every buffer index the peer hands over is checked against this side's record of
//! who holds what, so one process never holds a buffer twice.
//!
//! # Doorbells
//!
//! Each side waits according to its [`Mode`]: [`Mode::Poll`] spins, [`Mode::Block`] sleeps on a
//! futex in the segment, [`Mode::Adaptive`] spins for [`Config::spin`] and then sleeps, and
//! stops spinning while its spins keep ending in sleep with other threads wanting the CPU
//! (see `spin.rs`: each such spin doubles the waits that sleep at once, up to 63; a spin
//! that succeeds on its own CPU resets that). A side
//! about to sleep sets a need-wake-up bit in its doorbell word; the peer makes the `futex_wake`
//! system call only when it finds that bit set, so no system call is made while the waiter is
//! awake. The protocol is model-checked with loom (see `bell.rs`), and so is the rings' stamp
//! publication (`ring_loom.rs`). All waits take a timeout
//! (`None` = for ever, still bounded by peer liveness).
//!
//! A receiver can also set an *event limit* ([`Receiver::wait_ready_for`]): it asks to be woken
//! only once enough records could be there, and the sender's flush rings only then, so a
//! stream costs one wake-up per batch. The limit lives in the doorbell word the peer writes,
//! so a peer's limit only ever delays its own wake-up, and a word that keeps changing gets a
//! plain ring after a few tries.
//!
//! # Trust
//!
//! Nothing read from shared memory is trusted: every index, length, descriptor and free-ring
//! entry is checked before use. A violation is [`ShmError::CorruptPeer`], and from then on every
//! call on this endpoint returns that error: the side stops using the segment. A hostile peer
//! can still change bytes of a record or buffer while we read them (it is shared memory), but it
//! cannot make us access anything outside the segment.
//!
//! ## What the peer can write while we hold a reference
//!
//! The whole segment is mapped shared and writable in both processes (the memfd's seals stop
//! it from shrinking or growing, not from being written). So a hostile peer can write, at any
//! moment:
//!
//! - the **control block**: the header (we read it once, at attach, into a private copy that
//!   is validated and used from then on: see `segment.rs`), every ring and free-ring index, and
//!   the doorbell words;
//! - the **rings**: record headers and stamps, including those of records it has published and
//!   we have not consumed, and the payload of an inline [`Record`] while we read it in place;
//! - the **pool**: any buffer, including one we hold as a [`Buf`] (ours by the protocol, not by
//!   the hardware);
//! - the **free rings**: their slots and indices.
//!
//! What we rely on, so that none of that can move one of our accesses out of bounds:
//!
//! - every length, index, offset and descriptor that decides *where* we read or write is read
//!   from the segment exactly once, by an atomic or volatile load into a local, and only that
//!   local is checked and used: record headers (`ring.rs`: `len` and `kind` copied by volatile
//!   reads, then checked against the ring's end), stamps and ring indices (atomic loads,
//!   checked against our own positions), free-ring slots (`pool.rs`: one volatile read, then
//!   checked against the pool's size and our record of who holds what), buffer descriptors
//!   (`receiver.rs`: the 16 bytes copied by one volatile read, then checked);
//! - our own positions (the producer's tail, the consumer's head) are kept in private memory;
//!   the copies in the segment are only written by us (or read for diagnostics), and a new
//!   endpoint starts from 0, not from what the segment says;
//! - sizes and offsets of the rings, free rings and pool come from our validated copy of the
//!   header, never from the segment again;
//! - payload bytes (an inline record's, a buffer's) are data: this crate never derives an
//!   address from them. A consumer that parses them (the link's protocol parser reads inline
//!   records in place) does so with bounds-checked code, so bytes changed under it give a
//!   protocol error or wrong data, not an access outside the record. Copying every payload
//!   out first would close that window too, at the cost the in-place path exists to avoid.
//!
//! # Threads
//!
//! [`Endpoint::split`] gives a [`Sender`] and a [`Receiver`] that may run on different threads.
//! [`Buf`]s may be dropped on any thread.
//!
//! # Files left behind
//!
//! None from the segment: a memfd has no name. A path socket is removed when the [`Listener`]
//! is dropped; if the listening process is killed it stays until the next bind at that path
//! replaces it. Abstract addresses (`@name`) never create a file.

mod bell;
mod config;
mod connect;
mod control;
mod echo;
mod endpoint;
mod error;
mod handoff;
mod layout;
mod pages;
mod pool;
mod receiver;
mod ring;
#[cfg(all(test, loom))]
mod ring_loom;
mod segment;
mod sender;
mod shared;
mod spin;

pub use config::{Config, Mode};
pub use connect::{connect, pair, Listener, Pending, LISTEN_BACKLOG};
pub use echo::{echo, echo_with, serve_echo, EchoEvent, EchoStats};
pub use endpoint::{Endpoint, Side};
pub use error::{AttachError, ConfigError, Result, ShmError};
pub use handoff::Handoff;
pub use layout::{Layout, MAGIC, VERSION};
pub use pages::{PageBuf, PAGE};
pub use pool::Buf;
pub use receiver::{EventLimit, Receiver, Record};
pub use sender::{Allocator, Sender};
pub use spin::SpinStats;

/// How often a waiting side checks that its peer is still alive.
pub const LIVENESS: std::time::Duration = shared::LIVENESS_SLICE;
