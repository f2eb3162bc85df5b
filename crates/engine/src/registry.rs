//! The task registry: the commands a pipeline may name, their documentation and factories.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::sync::Arc;

use crate::hooks::{GetHookFactory, HookInfo, HookSite, PutHookFactory};
use crate::lang::HookKind;
use crate::ports::HostPorts;
use crate::queue::{GetHook, PutHook};
use crate::sandbox::FileError;
use crate::task::{Priority, Task};

/// An argument a task rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct ArgError {
    /// The argument at fault, if one is (the error then points at its column).
    pub arg: Option<String>,
    /// What is wrong.
    pub message: String,
    /// The pipeline's budget it went over, if that is what is wrong
    /// ([`Build::reserve_memory`]).
    pub over: Option<offhost_units::OverLimit>,
}

impl ArgError {
    /// An error about argument `arg`.
    pub fn new(arg: impl Into<String>, message: impl Into<String>) -> ArgError {
        ArgError {
            arg: Some(arg.into()),
            message: message.into(),
            over: None,
        }
    }

    /// `name=value` is outside the range the task allows: the message names the argument, the
    /// value given and the range.
    pub fn range(name: &str, value: impl fmt::Display, allowed: impl fmt::Display) -> ArgError {
        ArgError::new(name, format!("{name}={value}: must be {allowed}"))
    }

    /// An error about the task as a whole (its ports, say).
    pub fn task(message: impl Into<String>) -> ArgError {
        ArgError {
            arg: None,
            message: message.into(),
            over: None,
        }
    }
}

impl FileError {
    /// As an argument error of `arg` (so the pipeline error points at it).
    pub fn arg(self, arg: &str) -> ArgError {
        ArgError::new(arg, self.to_string())
    }
}

/// The arguments of one task line, with defaults filled in from the task's [`ArgDoc`]s.
#[derive(Debug, Clone, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
}

impl Args {
    /// Arguments from `(name, value)` pairs (for building tasks in code).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Args {
        Args {
            values: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub(crate) fn insert(&mut self, k: String, v: String) {
        self.values.insert(k, v);
    }

    /// The raw value of `name`, if given or defaulted.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `name`, which must be present.
    pub fn required(&self, name: &str) -> Result<&str, ArgError> {
        self.get(name)
            .ok_or_else(|| ArgError::new(name, format!("missing argument {name}=...")))
    }

    /// Parses `name` as `T`; `Ok(None)` if absent. Text that reads as a number that is not
    /// finite (`NaN`, `inf`, `-infinity`, `1e400`) is refused whatever `T` is: no task means
    /// one.
    pub fn parse_opt<T: FromStr>(&self, name: &str) -> Result<Option<T>, ArgError>
    where
        T::Err: fmt::Display,
    {
        match self.get(name) {
            None => Ok(None),
            Some(v) if v.trim().parse::<f64>().is_ok_and(|x| !x.is_finite()) => Err(ArgError::new(
                name,
                format!("{name}={v}: not a finite number"),
            )),
            Some(v) => v
                .parse::<T>()
                .map(Some)
                .map_err(|e| ArgError::new(name, format!("{name}={v}: {e}"))),
        }
    }

    /// Parses `name` as a number `T` (an integer or floating-point type) within `allowed`;
    /// `Ok(None)` if absent. Out of range is an error naming the argument, its value and the
    /// range.
    pub fn parse_in_opt<T>(
        &self,
        name: &str,
        allowed: RangeInclusive<T>,
    ) -> Result<Option<T>, ArgError>
    where
        T: FromStr + PartialOrd + fmt::Display,
        T::Err: fmt::Display,
    {
        match self.parse_opt::<T>(name)? {
            None => Ok(None),
            Some(v) if allowed.contains(&v) => Ok(Some(v)),
            // The value as written (`1e-300`, not its 300 digits).
            Some(_) => Err(ArgError::range(
                name,
                self.get(name).unwrap_or_default(),
                format_args!("between {} and {}", allowed.start(), allowed.end()),
            )),
        }
    }

    /// Parses `name` as a number `T` within `allowed`, which must be present (or have a
    /// default); see [`parse_in_opt`](Self::parse_in_opt).
    pub fn parse_in<T>(&self, name: &str, allowed: RangeInclusive<T>) -> Result<T, ArgError>
    where
        T: FromStr + PartialOrd + fmt::Display,
        T::Err: fmt::Display,
    {
        self.parse_in_opt(name, allowed)?
            .ok_or_else(|| ArgError::new(name, format!("missing argument {name}=...")))
    }

    /// Parses `name` as a number of seconds within `allowed` (finite, and at most
    /// `MAX_SECONDS` whatever `allowed` says, so that it always makes a [`Duration`]);
    /// `Ok(None)` if absent.
    ///
    /// [`Duration`]: std::time::Duration
    pub fn seconds_in_opt(
        &self,
        name: &str,
        allowed: RangeInclusive<f64>,
    ) -> Result<Option<std::time::Duration>, ArgError> {
        let allowed = allowed.start().max(0.0)..=allowed.end().min(MAX_SECONDS);
        Ok(self
            .parse_in_opt::<f64>(name, allowed)?
            .map(std::time::Duration::from_secs_f64))
    }

    /// Parses `name` as `T`, which must be present (or have a default).
    pub fn parse<T: FromStr>(&self, name: &str) -> Result<T, ArgError>
    where
        T::Err: fmt::Display,
    {
        self.parse_opt(name)?
            .ok_or_else(|| ArgError::new(name, format!("missing argument {name}=...")))
    }

    /// Parses `name` as a byte count with an optional suffix (`k`, `M`, `G`, `KiB`...);
    /// `Ok(None)` if absent.
    pub fn size_opt(&self, name: &str) -> Result<Option<u64>, ArgError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => offhost_units::parse_size(v).map(Some).map_err(|_| {
                ArgError::new(
                    name,
                    format!("{name}={v}: expected a size like 4096, 64k or 1M"),
                )
            }),
        }
    }

    /// Parses `name` as a byte count (as [`size_opt`](Self::size_opt)) within `allowed`;
    /// `Ok(None)` if absent.
    pub fn size_in_opt(
        &self,
        name: &str,
        allowed: RangeInclusive<u64>,
    ) -> Result<Option<u64>, ArgError> {
        match self.size_opt(name)? {
            Some(v) if !allowed.contains(&v) => Err(ArgError::range(
                name,
                v,
                format_args!("between {} and {} bytes", allowed.start(), allowed.end()),
            )),
            v => Ok(v),
        }
    }
}

/// The most seconds [`Args::seconds_in_opt`] takes: about 31 years, far inside what a
/// [`std::time::Duration`] holds.
pub const MAX_SECONDS: f64 = 1e9;

/// Documentation of one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDoc {
    /// Name, as in `name=value`.
    pub name: String,
    /// Default value, if any.
    pub default: Option<String>,
    /// Whether the pipeline must give it.
    pub required: bool,
    /// One line of documentation.
    pub doc: String,
}

/// What a command is, what it takes and how it connects.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    /// Command name.
    pub name: String,
    /// One line saying what it does.
    pub summary: String,
    /// Arguments, in the order positional arguments fill them.
    pub args: Vec<ArgDoc>,
    /// Fewest and most inputs.
    pub inputs: (usize, usize),
    /// Fewest and most outputs.
    pub outputs: (usize, usize),
    /// Whether it creates buffers for its outputs (and so needs a pool on each).
    pub allocates: bool,
    /// Pool (count, size) used when an output of an allocating task names no free list.
    pub default_pool: (usize, usize),
    /// Smallest buffer size it can work with.
    pub min_buffer: usize,
    /// Default scheduling class (a line may override it with `priority=`).
    pub priority: Priority,
}

impl TaskInfo {
    /// A task with no arguments, one input and one output, that does not allocate.
    pub fn new(name: impl Into<String>, summary: impl Into<String>) -> TaskInfo {
        TaskInfo {
            name: name.into(),
            summary: summary.into(),
            args: Vec::new(),
            inputs: (1, 1),
            outputs: (1, 1),
            allocates: false,
            default_pool: (16, 4096),
            min_buffer: 1,
            priority: Priority::Normal,
        }
    }

    /// Adds an optional argument with a default value.
    pub fn arg(mut self, name: &str, default: &str, doc: &str) -> Self {
        self.args.push(ArgDoc {
            name: name.into(),
            default: Some(default.into()),
            required: false,
            doc: doc.into(),
        });
        self
    }

    /// Adds an optional argument with no default.
    pub fn optional(mut self, name: &str, doc: &str) -> Self {
        self.args.push(ArgDoc {
            name: name.into(),
            default: None,
            required: false,
            doc: doc.into(),
        });
        self
    }

    /// Adds a required argument.
    pub fn required(mut self, name: &str, doc: &str) -> Self {
        self.args.push(ArgDoc {
            name: name.into(),
            default: None,
            required: true,
            doc: doc.into(),
        });
        self
    }

    /// Sets the allowed number of inputs.
    pub fn inputs(mut self, min: usize, max: usize) -> Self {
        self.inputs = (min, max);
        self
    }

    /// Sets the allowed number of outputs.
    pub fn outputs(mut self, min: usize, max: usize) -> Self {
        self.outputs = (min, max);
        self
    }

    /// Marks it as creating buffers, with the default pool for outputs that name none.
    pub fn allocates(mut self, count: usize, size: usize) -> Self {
        self.allocates = true;
        self.default_pool = (count, size);
        self
    }

    /// Sets the smallest buffer size it accepts.
    pub fn min_buffer(mut self, bytes: usize) -> Self {
        self.min_buffer = bytes;
        self
    }

    /// Sets the default scheduling class.
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }
}

/// What a factory knows about the task it builds.
pub struct Build<'a> {
    pub(crate) inputs: usize,
    pub(crate) outputs: usize,
    pub(crate) task_id: usize,
    pub(crate) host: &'a mut HostPorts,
    pub(crate) files: &'a crate::sandbox::Files,
    pub(crate) blobs: &'a crate::blobs::Blobs,
    /// Bytes the pipeline reserves so far (free lists, and tasks' memory) and its budget's
    /// `pool_bytes`.
    pub(crate) memory: &'a mut u64,
    pub(crate) memory_limit: u64,
}

impl Build<'_> {
    /// Number of input queues of this line.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Number of output queues of this line.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// The file access of this pipeline: the only way a task opens a file.
    pub fn files(&self) -> &crate::sandbox::Files {
        self.files
    }

    /// Reserves `bytes` of memory the task may take beyond its free lists (a WebAssembly
    /// instance's cap), counted with the free lists against the pipeline's budget
    /// ([`Budget::pool_bytes`](crate::Budget::pool_bytes)); past it, an error naming the limit
    /// and the argument `arg` that asked. A daemon counts it in its total too.
    pub fn reserve_memory(&mut self, arg: &str, bytes: u64) -> Result<(), ArgError> {
        let total = self.memory.saturating_add(bytes);
        if total > self.memory_limit {
            let over = offhost_units::OverLimit::new(
                offhost_units::Limit::MaxPoolBytes,
                self.memory_limit,
            )
            .asked(total);
            return Err(ArgError {
                over: Some(over),
                ..ArgError::new(
                    arg,
                    format!("{bytes} bytes of memory bring the pipeline's free lists and task memory to {total} bytes"),
                )
            });
        }
        *self.memory = total;
        Ok(())
    }

    /// The blob called `name` that came with the pipeline (a module sent beside its text),
    /// if one did.
    pub fn blob(&self, name: &str) -> Option<std::sync::Arc<[u8]>> {
        self.blobs.get(name).cloned()
    }

    /// A waker for this task that something outside the pipeline (a thread of the task's
    /// own, a link to another engine) uses to wake it once the pipeline runs. Each counts
    /// against the pipeline's [`Budget::links`](crate::Budget::links): the tasks that need
    /// one are those that hold a connection.
    pub fn outside_waker(&mut self) -> crate::runq::OutsideWaker {
        let w = crate::runq::OutsideWaker::default();
        self.host
            .wakers
            .push((std::sync::Arc::clone(&w.0), self.task_id));
        w
    }
}

/// Makes a task from its arguments.
pub type Factory =
    Arc<dyn Fn(&Args, &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> + Send + Sync>;

/// The commands a pipeline may use.
#[derive(Clone, Default)]
pub struct Registry {
    entries: BTreeMap<String, (TaskInfo, Factory)>,
    put_hooks: BTreeMap<String, (HookInfo, PutHookFactory)>,
    get_hooks: BTreeMap<String, (HookInfo, GetHookFactory)>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a command (replacing one of the same name).
    pub fn register<F>(&mut self, info: TaskInfo, factory: F)
    where
        F: Fn(&Args, &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> + Send + Sync + 'static,
    {
        self.entries
            .insert(info.name.clone(), (info, Arc::new(factory)));
    }

    /// Looks a command up.
    pub fn get(&self, name: &str) -> Option<(&TaskInfo, &Factory)> {
        self.entries.get(name).map(|(i, f)| (i, f))
    }

    /// All commands, by name.
    pub fn infos(&self) -> impl Iterator<Item = &TaskInfo> {
        self.entries.values().map(|(i, _)| i)
    }

    /// The names of all commands, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// Adds a put hook a queue may name as `[put=NAME]` (replacing one of the same name);
    /// `factory` makes each queue's own.
    pub fn register_put_hook<F>(&mut self, name: &str, doc: &str, factory: F)
    where
        F: Fn(&HookSite) -> PutHook + Send + Sync + 'static,
    {
        let info = HookInfo::new(name, HookKind::Put, doc);
        self.put_hooks
            .insert(name.to_owned(), (info, Arc::new(factory)));
    }

    /// Adds a get hook a queue may name as `[get=NAME]` (replacing one of the same name);
    /// `factory` makes each queue's own.
    pub fn register_get_hook<F>(&mut self, name: &str, doc: &str, factory: F)
    where
        F: Fn(&HookSite) -> GetHook + Send + Sync + 'static,
    {
        let info = HookInfo::new(name, HookKind::Get, doc);
        self.get_hooks
            .insert(name.to_owned(), (info, Arc::new(factory)));
    }

    /// Removes get hook `name`, if there is one (a daemon drops the built-in `status`).
    pub fn remove_get_hook(&mut self, name: &str) {
        self.get_hooks.remove(name);
    }

    /// Looks a put hook up by name.
    pub fn put_hook(&self, name: &str) -> Option<&PutHookFactory> {
        self.put_hooks.get(name).map(|(_, f)| f)
    }

    /// Looks a get hook up by name.
    pub fn get_hook(&self, name: &str) -> Option<&GetHookFactory> {
        self.get_hooks.get(name).map(|(_, f)| f)
    }

    /// All hooks: the put hooks by name, then the get hooks by name.
    pub fn hook_infos(&self) -> impl Iterator<Item = &HookInfo> {
        let put = self.put_hooks.values().map(|(i, _)| i);
        put.chain(self.get_hooks.values().map(|(i, _)| i))
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.keys()).finish()
    }
}
