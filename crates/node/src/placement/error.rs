//! Why a file cannot be placed over the engines given.

/// A file's tasks cannot be placed as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// No engine was named.
    #[error("no engine to place the pipeline on")]
    NoEngines,
    /// A task names an engine that was not given.
    #[error("line {line}, column {col}: @{name} is not one of the engines given ({known})")]
    UnknownEngine {
        /// Line of the placement.
        line: usize,
        /// Column of its `@`.
        col: usize,
        /// The name written.
        name: String,
        /// The names given, comma-separated.
        known: String,
    },
    /// The tasks' queues form a cycle (through these engines), so no part can be started
    /// before the others.
    #[error("the queues of the tasks on engines {a} and {b} lead back to where they come from (a cycle); a pipeline's queues must flow one way")]
    Cycle {
        /// One engine.
        a: String,
        /// The other.
        b: String,
    },
    /// A service's `host-in` and `host-out` sit on different engines (or stages).
    #[error("the service {name} has its host-in (line {host_in}) and its host-out (line {host_out}) in different parts: place both on one engine")]
    SplitService {
        /// The service's name.
        name: String,
        /// Line of its `host-in`.
        host_in: usize,
        /// Line of its `host-out`.
        host_out: usize,
    },
    /// A service is called both from its own part and from another.
    #[error("the service {name} is called from its own engine (line {beside}) and from another (line {afar}): place its calls all beside it or all on other engines")]
    ServiceCalledBesideAndFromAfar {
        /// The service's name.
        name: String,
        /// Line of a call in the service's part.
        beside: usize,
        /// Line of a call in another part.
        afar: usize,
    },
    /// A part that serves calls from other engines holds another source, which stopping the
    /// service once its callers are done would cut short.
    #[error("line {line}: {task} is a source on part {part}, which serves calls from other engines and is stopped once they are done; place it on another engine")]
    SourceBesideService {
        /// The serving part.
        part: String,
        /// The source's command.
        task: String,
        /// Its line.
        line: usize,
    },
    /// A value cannot be written back into pipeline text.
    #[error(
        "line {line}: the value {value:?} holds a '\"' and cannot be passed on to another engine"
    )]
    Unquotable {
        /// Line of the task.
        line: usize,
        /// The value.
        value: String,
    },
}
