//! `host-in` and `host-out`: the tasks at a pipeline's host ports (see [`crate::host`]).

use crate::host::{host_in, host_out};
use crate::registry::{ArgError, Args, Build};
use crate::task::Task;

fn channel_name(args: &Args) -> Result<String, ArgError> {
    let n = args.required("name")?;
    if n.is_empty() {
        return Err(ArgError::new("name", "name must not be empty"));
    }
    Ok(n.to_string())
}

pub(crate) fn host_in_factory(args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let name = channel_name(args)?;
    if b.host.inputs.contains_key(&name) {
        return Err(ArgError::new(
            "name",
            format!("host-in channel '{name}' is already used"),
        ));
    }
    let whole = args.parse_opt::<bool>("whole")?.unwrap_or(false);
    let (task, port) = host_in(name.clone(), b.task_id, whole);
    b.host.inputs.insert(name, port);
    Ok(Box::new(task))
}

pub(crate) fn host_out_factory(args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let name = channel_name(args)?;
    if b.host.outputs.contains_key(&name) {
        return Err(ArgError::new(
            "name",
            format!("host-out channel '{name}' is already used"),
        ));
    }
    let whole = args.parse_opt::<bool>("whole")?.unwrap_or(false);
    let (task, port) = host_out(b.task_id, whole);
    b.host.outputs.insert(name, port);
    Ok(Box::new(task))
}
