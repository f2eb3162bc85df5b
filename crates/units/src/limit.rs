//! "Over a limit", said the same way by every layer, in no front end's words.
//!
//! A budget that refuses something (a channel, a session, a pipeline, a connection) says so
//! with an [`OverLimit`]: which [`Limit`] (a stable identifier, [`Limit::id`]), its value, and
//! how much was asked for where that is known. Its message names the limit by its id and
//! nothing else: how to raise a limit is the front end's to say, in its own words. The `offhost`
//! command line says its flag ([`Limit::flag`]); the Python and C bindings name their own
//! parameter where they have one, else the id.
//!
//! A library error that carries an [`OverLimit`] says the same in its own message and returns
//! it as its [`source`](std::error::Error::source), so a front end finds it with
//! [`OverLimit::find`] however deep it was wrapped, and prints the chain with [`explain`],
//! which says each part once and adds the front end's words for raising the limit.
//!
//! Text that crosses a connection (a refusal a server sends its client) cannot be matched by
//! type on the other side; [`OverLimit::for_peer`] adds how the server's operator raises it:
//! the flag of the `offhost` command that serves it.

use std::fmt;
use std::time::Duration;

/// How a limit's value is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Things, named by the noun (`"channels"`).
    Count(&'static str),
    /// Bytes.
    Bytes,
    /// Milliseconds (the value of a timeout or deadline).
    Millis,
}

macro_rules! limits {
    ($($(#[$doc:meta])* $v:ident = $id:literal, $unit:expr, $side:literal, [$($cmd:literal),*];)*) => {
        /// A limit of some layer's budget, named the same everywhere.
        ///
        /// Each has a stable snake_case [`id`](Limit::id); a front end maps it to its own
        /// way of raising it ([`flag`](Limit::flag) for the command line).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Limit {
            $($(#[$doc])* $v,)*
        }

        impl Limit {
            /// Every limit.
            pub const ALL: &'static [Limit] = &[$(Limit::$v,)*];

            /// The stable identifier: snake_case, the same in every message and front end
            /// (`"max_channel_window"`).
            pub fn id(self) -> &'static str {
                match self { $(Limit::$v => $id,)* }
            }

            /// How its value is counted.
            pub fn unit(self) -> Unit {
                match self { $(Limit::$v => $unit,)* }
            }

            /// Whose limit it is, as a client of that server would say it (`"engine"`).
            fn side(self) -> &'static str {
                match self { $(Limit::$v => $side,)* }
            }

            /// The `offhost` commands that take its [`flag`](Limit::flag) (`["engine",
            /// "run"]`): the command line's names, for the command line and for text sent to
            /// a peer.
            pub fn commands(self) -> &'static [&'static str] {
                match self { $(Limit::$v => &[$($cmd),*],)* }
            }
        }
    };
}

limits! {
    /// Channels a peer may have open on one link (`offhost_proto::Limits::max_channels`).
    MaxChannels = "max_channels", Unit::Count("channels"), "server", ["engine", "echo"];
    /// Receive window of one channel a peer opens (`max_channel_window`).
    MaxChannelWindow = "max_channel_window", Unit::Bytes, "server", ["engine", "echo"];
    /// Receive windows of one link's channels together (`max_session_window`).
    MaxSessionWindow = "max_session_window", Unit::Bytes, "server", ["engine", "echo"];
    /// Sessions a link server serves at once (`offhost_link::Limits::max_sessions`).
    MaxSessions = "max_sessions", Unit::Count("sessions"), "server", ["engine", "echo"];
    /// Threads a link server runs for its peers (`max_threads`).
    MaxThreads = "max_threads", Unit::Count("threads"), "server", ["engine", "echo"];
    /// Bytes held for a peer that reads nothing (`max_unsent`).
    MaxUnsent = "max_unsent", Unit::Bytes, "server", ["engine", "echo"];
    /// How long a write may make no progress (`write_stall`).
    WriteStall = "write_stall", Unit::Millis, "server", ["engine", "echo"];
    /// How long a handshake may take (a link's `shm:` and `tls:` handshakes; NBD's whole
    /// handshake).
    HandshakeTimeout = "handshake_timeout", Unit::Millis, "server", ["engine", "echo", "nbd"];
    /// Bytes of one pipeline's free lists (`offhost_engine::Budget::pool_bytes`).
    MaxPoolBytes = "max_pool_bytes", Unit::Bytes, "engine", ["engine", "run"];
    /// Buffers of one pipeline's free lists (`Budget::buffers`).
    MaxBuffers = "max_buffers", Unit::Count("buffers"), "engine", ["engine", "run"];
    /// Tasks of one pipeline (`Budget::tasks`).
    MaxTasks = "max_tasks", Unit::Count("tasks"), "engine", ["engine", "run"];
    /// Worker threads of one pipeline (`Budget::workers`).
    MaxWorkers = "max_workers", Unit::Count("worker threads"), "engine", ["engine", "run"];
    /// Links to other engines one pipeline's tasks open (`Budget::links`).
    MaxTaskLinks = "max_task_links", Unit::Count("links"), "engine", ["engine", "run"];
    /// Pipelines an engine daemon runs at once (`offhost_node::DaemonLimits::pipelines`).
    MaxPipelines = "max_pipelines", Unit::Count("running pipelines"), "engine", ["engine"];
    /// Bytes of the free lists of all a daemon's pipelines (`DaemonLimits::pool_bytes`).
    MaxTotalPoolBytes = "max_total_pool_bytes", Unit::Bytes, "engine", ["engine"];
    /// How long one pipeline a daemon runs may run (`DaemonLimits::pipeline_time`).
    MaxPipelineTime = "max_pipeline_time", Unit::Millis, "engine", ["engine"];
    /// Bytes that may enter one pipeline a daemon runs, from its sources
    /// (`DaemonLimits::pipeline_bytes`).
    MaxPipelineBytes = "max_pipeline_bytes", Unit::Bytes, "engine", ["engine"];
    /// Bytes of one pipeline text a daemon takes (`DaemonLimits::text_bytes`).
    MaxTextBytes = "max_text_bytes", Unit::Bytes, "engine", ["engine"];
    /// Bytes of the named modules one session sends a daemon with its pipelines
    /// (`DaemonLimits::module_bytes`).
    MaxModuleBytes = "max_module_bytes", Unit::Bytes, "engine", ["engine"];
    /// Off-host submissions one host has outstanding, receives included.
    HostOutstanding = "host_outstanding", Unit::Count("outstanding submissions"), "engine", ["engine"];
    /// Bytes of one host's sends in flight.
    HostBytes = "host_bytes", Unit::Bytes, "engine", ["engine"];
    /// Channels one off-host host has open.
    HostChannels = "host_channels", Unit::Count("channels per host"), "engine", ["engine"];
    /// Off-host hosts an engine serves.
    MaxHosts = "max_hosts", Unit::Count("hosts"), "engine", ["engine"];
    /// Links to other engines (`PeerConfig::max_links`; lanes count twice).
    MaxLinks = "max_links", Unit::Count("peer links"), "engine", ["engine"];
    /// Channels with mailboxes (`RouterLimits::mailboxes`).
    MaxMailboxes = "max_mailboxes", Unit::Count("channels with mailboxes"), "engine", ["engine"];
    /// Connections an NBD server serves at once (`offhost_nbd::Limits::max_connections`).
    MaxConnections = "max_connections", Unit::Count("connections"), "NBD server", ["nbd"];
    /// Bytes of one WebAssembly module a `wasm` task loads (`offhost_wasm::Limits::module_bytes`).
    WasmModuleBytes = "wasm_module_bytes", Unit::Bytes, "engine", [];
    /// How long compiling one WebAssembly module may take (`Limits::compile_time`).
    WasmCompileTime = "wasm_compile_time", Unit::Millis, "engine", [];
    /// Linear memory of one `wasm` task's instance: the task's `memory=` argument.
    WasmMemory = "wasm_memory", Unit::Bytes, "engine", [];
    /// How long one call into a `wasm` task's module may run: the task's `deadline=` argument.
    WasmDeadline = "wasm_deadline", Unit::Millis, "engine", [];
}

impl Limit {
    /// The `offhost` command line's flag that sets this limit (`"--max-channel-window"`):
    /// the command line's name for it, for the command line and for text sent to a peer; a
    /// library's own message names the limit by [`id`](Self::id).
    pub fn flag(self) -> String {
        format!("--{}", self.id().replace('_', "-"))
    }

    /// The limit whose [`id`](Self::id) is `id`.
    pub fn from_id(id: &str) -> Option<Limit> {
        Limit::ALL.iter().copied().find(|l| l.id() == id)
    }

    /// `n` in this limit's unit: `16777216 bytes`, `64 sessions`, `5s`.
    pub fn amount(self, n: u64) -> Amount {
        Amount(self.unit(), n)
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A number in a limit's unit, for messages ([`Limit::amount`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(Unit, u64);

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Unit::Count(noun) => write!(f, "{} {noun}", self.1),
            Unit::Bytes => write!(f, "{} bytes", self.1),
            Unit::Millis => write!(
                f,
                "{}",
                humantime::format_duration(Duration::from_millis(self.1))
            ),
        }
    }
}

/// Something asked for more than a [`Limit`] allows.
///
/// Its message says which limit and its value, in neutral words: "over the limit
/// max_channel_window of 16777216 bytes". The error that carries it says what went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("over the limit {limit} of {}", limit.amount(*value))]
pub struct OverLimit {
    /// Which limit.
    pub limit: Limit,
    /// Its value, in its [`unit`](Limit::unit) (milliseconds for a time).
    pub value: u64,
    /// How much was asked for, in the same unit, where one amount asked for more.
    pub asked: Option<u64>,
}

impl OverLimit {
    /// `limit`, whose value is `value` (a count or bytes), went over.
    pub fn new(limit: Limit, value: impl TryInto<u64>) -> OverLimit {
        OverLimit {
            limit,
            value: value.try_into().unwrap_or(u64::MAX),
            asked: None,
        }
    }

    /// `limit`, a time of `value`, passed.
    pub fn time(limit: Limit, value: Duration) -> OverLimit {
        OverLimit::new(limit, value.as_millis())
    }

    /// The same, saying that `asked` was asked for.
    #[must_use]
    pub fn asked(self, asked: impl TryInto<u64>) -> OverLimit {
        OverLimit {
            asked: Some(asked.try_into().unwrap_or(u64::MAX)),
            ..self
        }
    }

    /// The first [`OverLimit`] in `e`'s chain of sources, `e` included.
    pub fn find<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a OverLimit> {
        let mut at = Some(e);
        while let Some(e) = at {
            if let Some(o) = e.downcast_ref::<OverLimit>() {
                return Some(o);
            }
            at = e.source();
        }
        None
    }

    /// The words a server adds when it sends this to a client as text, which the client
    /// cannot match by type: the `offhost` command and flag that raise it on the server.
    /// "(the engine raises it with offhost engine --max-pipelines)".
    pub fn for_peer(&self) -> ForPeer {
        ForPeer(self.limit)
    }
}

/// What a front end may tell its user to do after an error: raise a limit that was gone
/// over, or set a setting that allows what was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Remedy {
    /// Raise this limit ([`OverLimit`]).
    Raise(Limit),
    /// Set this setting ([`Needs`](crate::setting::Needs)).
    Allow(crate::setting::Setting),
}

impl Remedy {
    /// The `offhost` command line's words for it, if `offhost COMMAND` takes its flag:
    /// "raise it with --max-tasks", "allow it with --insecure".
    pub fn command_line(self, command: &str) -> Option<String> {
        match self {
            Remedy::Raise(l) => (l.takes(command)).then(|| format!("raise it with {}", l.flag())),
            Remedy::Allow(s) => (s.takes(command)).then(|| format!("allow it with {}", s.flag())),
        }
    }
}

/// `e` and its sources as one line, `outer: inner: ...`, for a front end to print: a source is
/// left out where the text before it says it already (an error that carries an [`OverLimit`]
/// says it in its own message too). If one of them went over a limit, or was refused for want
/// of a setting, and `words` has words for that [`Remedy`] (the front end's way to raise the
/// limit or set the setting), they follow in parentheses.
pub fn explain(
    e: &(dyn std::error::Error + 'static),
    words: impl Fn(Remedy) -> Option<String>,
) -> String {
    let mut text = e.to_string();
    let mut at = e.source();
    while let Some(s) = at {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        at = s.source();
    }
    let remedy = match OverLimit::find(e) {
        Some(o) => Some(Remedy::Raise(o.limit)),
        None => crate::setting::Needs::find(e).map(|n| Remedy::Allow(n.setting)),
    };
    match remedy.and_then(words) {
        Some(how) => format!("{text} ({how})"),
        None => text,
    }
}

/// What a server's refusal sent as text adds ([`OverLimit::for_peer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForPeer(Limit);

impl fmt::Display for ForPeer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.0;
        // `offhost run` serves no peer.
        let cmds: Vec<&str> = l
            .commands()
            .iter()
            .copied()
            .filter(|c| *c != "run")
            .collect();
        if cmds.is_empty() {
            // A limit of a pipeline's own (a task's argument) or fixed in the engine.
            return write!(f, "(a limit of the {}'s, set by no flag)", l.side());
        }
        let (side, cmds, flag) = (l.side(), one_of(&cmds), l.flag());
        write!(f, "(the {side} raises it with offhost {cmds} {flag})")
    }
}

/// `a`, `a or b`, `a, b or c`: the `offhost` subcommands a server's text names.
pub(crate) fn one_of(cmds: &[&str]) -> String {
    let mut out = String::new();
    for (i, c) in cmds.iter().enumerate() {
        out.push_str(match i {
            0 => "",
            i if i + 1 == cmds.len() => " or ",
            _ => ", ",
        });
        out.push_str(c);
    }
    out
}

impl Limit {
    /// Whether `offhost command` takes this limit's [`flag`](Self::flag).
    pub fn takes(self, command: &str) -> bool {
        self.commands().contains(&command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_snake_case_and_come_back() {
        let mut ids: Vec<_> = Limit::ALL.iter().map(|l| l.id()).collect();
        for id in &ids {
            assert!(
                id.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{id}"
            );
            assert_eq!(Limit::from_id(id).map(Limit::id), Some(*id));
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Limit::ALL.len());
        assert_eq!(Limit::MaxChannelWindow.flag(), "--max-channel-window");
        assert_eq!(Limit::from_id("max_nothing"), None);
    }

    #[test]
    fn the_message_names_the_limit_and_no_flag() {
        let o = OverLimit::new(Limit::MaxChannelWindow, 1u32 << 20).asked(1u64 << 30);
        assert_eq!(
            o.to_string(),
            "over the limit max_channel_window of 1048576 bytes"
        );
        assert_eq!(o.asked, Some(1 << 30));
        assert_eq!(
            OverLimit::new(Limit::MaxSessions, 64usize).to_string(),
            "over the limit max_sessions of 64 sessions"
        );
        assert_eq!(
            OverLimit::time(Limit::WriteStall, Duration::from_secs(60)).to_string(),
            "over the limit write_stall of 1m"
        );
        assert_eq!(OverLimit::new(Limit::MaxTasks, -1i64).value, u64::MAX);
        for l in Limit::ALL {
            assert!(!OverLimit::new(*l, 1u8).to_string().contains("--"), "{l}");
        }
    }

    #[test]
    fn a_limit_without_a_flag_is_said_without_one() {
        let o = OverLimit::new(Limit::WasmMemory, 1u32 << 24);
        assert_eq!(
            o.for_peer().to_string(),
            "(a limit of the engine's, set by no flag)"
        );
        assert!(!Limit::WasmMemory.takes("engine"));
    }

    #[test]
    fn a_peer_is_told_the_servers_command_and_flag() {
        let o = OverLimit::new(Limit::MaxPipelines, 64usize);
        assert_eq!(
            o.for_peer().to_string(),
            "(the engine raises it with offhost engine --max-pipelines)"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped: {0}")]
    struct Wrapped(#[source] OverLimit);

    #[derive(Debug, thiserror::Error)]
    #[error("reading p.ion: {0}")]
    struct Outer(#[source] Wrapped);

    #[derive(Debug, thiserror::Error)]
    #[error("refusing tcp:h:1")]
    struct Refused(#[source] crate::setting::Needs);

    #[test]
    fn explain_says_each_source_once_and_how_to_raise_the_limit() {
        let e = Outer(Wrapped(OverLimit::new(Limit::MaxTasks, 4u8)));
        let flag = |r: Remedy| match r {
            Remedy::Raise(l) => Some(format!("raise it with {}", l.flag())),
            Remedy::Allow(s) => Some(format!("allow it with {}", s.flag())),
        };
        assert_eq!(
            explain(&e, flag),
            "reading p.ion: wrapped: over the limit max_tasks of 4 tasks (raise it with --max-tasks)"
        );
        assert_eq!(
            explain(&e, |_| None),
            "reading p.ion: wrapped: over the limit max_tasks of 4 tasks"
        );
        let io = std::io::Error::other("no limit here");
        assert_eq!(explain(&io, flag), "no limit here");
        let refused = Refused(crate::setting::Needs::new(
            crate::setting::Setting::Insecure,
        ));
        assert_eq!(
            explain(&refused, flag),
            "refusing tcp:h:1: the setting insecure (allow it with --insecure)"
        );
    }

    #[test]
    fn find_walks_the_sources() {
        let o = OverLimit::new(Limit::MaxTasks, 4u8);
        let w = Wrapped(o);
        assert_eq!(OverLimit::find(&w), Some(&o));
        assert_eq!(OverLimit::find(&o), Some(&o));
        let io = std::io::Error::other("no limit here");
        assert_eq!(OverLimit::find(&io), None);
    }
}
