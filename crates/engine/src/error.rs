//! Errors found in a pipeline description before anything runs.

/// What is wrong with a pipeline description. Every variant names the line and column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The text does not follow the grammar.
    #[error("line {line}, column {col}: expected {expected}, found {found}{}", hint_text(.hint))]
    Syntax {
        /// Line (from 1).
        line: usize,
        /// Column (from 1).
        col: usize,
        /// What the parser expected.
        expected: String,
        /// What it found.
        found: String,
        /// A suggestion, possibly empty.
        hint: String,
    },
    /// The description has no tasks.
    #[error("line 1, column 1: the pipeline has no tasks (write one task per line: command args <inputs >outputs)")]
    Empty,
    /// A command that is not in the registry.
    #[error("line {line}, column {col}: unknown task '{name}'; known tasks: {}", .known.join(", "))]
    UnknownTask {
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The name written.
        name: String,
        /// The names the registry knows.
        known: Vec<String>,
    },
    /// An argument is unknown, missing or has a bad value.
    #[error("line {line}, column {col}: task '{task}': {message}")]
    BadArgument {
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The task.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// A task has too few or too many inputs or outputs.
    #[error("line {line}, column {col}: task '{task}': {message}")]
    Ports {
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The task.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// A queue that some task writes but no task reads.
    #[error("line {line}, column {col}: queue '{queue}' is written but no task reads it (add a reader, e.g. 'null <{queue}')")]
    NoReader {
        /// Line of the writer.
        line: usize,
        /// Column of the queue name.
        col: usize,
        /// The queue.
        queue: String,
    },
    /// A queue that some task reads but no task writes.
    #[error("line {line}, column {col}: queue '{queue}' is read but no task writes it (check the spelling or add a source)")]
    NoWriter {
        /// Line of the reader.
        line: usize,
        /// Column of the queue name.
        col: usize,
        /// The queue.
        queue: String,
    },
    /// A queue read by more than one task.
    #[error("line {line}, column {col}: queue '{queue}' is already read by the task on line {first}; a queue has one reader (use 'dup' to copy a stream)")]
    TwoReaders {
        /// Line of the second reader.
        line: usize,
        /// Column.
        col: usize,
        /// The queue.
        queue: String,
        /// Line of the first reader.
        first: usize,
    },
    /// A free list declared twice with different shapes, or used but never given a shape.
    #[error("line {line}, column {col}: free list '{pool}': {message}")]
    PoolDeclaration {
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The pool.
        pool: String,
        /// What is wrong.
        message: String,
    },
    /// A free list with too few or too small buffers for the tasks that use it.
    #[error("line {line}, column {col}: free list '{pool}' is too small: {message}")]
    PoolTooSmall {
        /// Line of the declaration.
        line: usize,
        /// Column.
        col: usize,
        /// The pool.
        pool: String,
        /// Why.
        message: String,
    },
    /// The pipeline asks for more than its [`Budget`](crate::Budget) allows (its tasks, free
    /// lists, links, or, at 1:1, the worker threads it would start with).
    #[error("line {line}, column {col}: {message}, {over}")]
    OverBudget {
        /// Line of what goes over (the task or free list).
        line: usize,
        /// Column.
        col: usize,
        /// What goes over.
        message: String,
        /// The limit, its value and what was asked for.
        #[source]
        over: offhost_units::OverLimit,
    },
    /// The pipeline could not start (no worker thread, or a budget of the run); position 1:1.
    #[error("line 1, column 1: cannot start the pipeline: {message}")]
    Start {
        /// Why.
        message: String,
    },
    /// A hook written on a queue that the registry lacks, or two hooks of one kind on it.
    #[error("line {line}, column {col}: queue '{queue}': {message}")]
    Hook {
        /// Line.
        line: usize,
        /// Column of `put` or `get`.
        col: usize,
        /// The queue.
        queue: String,
        /// What is wrong.
        message: String,
    },
    /// Queues that form a loop: each task would wait on the previous one.
    #[error("line {line}, column {col}: queues form a cycle that could deadlock ({path}); each task in it waits for input from the one before")]
    Cycle {
        /// Line of one task in the cycle.
        line: usize,
        /// Column.
        col: usize,
        /// The cycle, as `task(line) -queue-> task(line) ...`.
        path: String,
    },
}

fn hint_text(h: &str) -> String {
    if h.is_empty() {
        String::new()
    } else {
        format!(" (hint: {h})")
    }
}

impl PipelineError {
    /// The (line, column) the error points at.
    pub fn position(&self) -> (usize, usize) {
        match self {
            PipelineError::Empty | PipelineError::Start { .. } => (1, 1),
            PipelineError::Syntax { line, col, .. }
            | PipelineError::UnknownTask { line, col, .. }
            | PipelineError::BadArgument { line, col, .. }
            | PipelineError::Ports { line, col, .. }
            | PipelineError::NoReader { line, col, .. }
            | PipelineError::NoWriter { line, col, .. }
            | PipelineError::TwoReaders { line, col, .. }
            | PipelineError::PoolDeclaration { line, col, .. }
            | PipelineError::PoolTooSmall { line, col, .. }
            | PipelineError::OverBudget { line, col, .. }
            | PipelineError::Hook { line, col, .. }
            | PipelineError::Cycle { line, col, .. } => (*line, *col),
        }
    }
}
