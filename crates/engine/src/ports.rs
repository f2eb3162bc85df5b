//! A pipeline's ports as it is built: its `host-in` and `host-out` channels, the tasks woken
//! from outside it, and the calls of its own services. The engine hands them over at start:
//! the services to their calls ([`hand_to_calls`]), the rest to the host ([`crate::Running`]).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crossbeam_channel::Sender;

use crate::host::{HostInput, HostOutput, InPort, OutPort};
use crate::own_service::OwnService;
use crate::runq::Waker;

/// The ports of a pipeline being built.
#[derive(Default)]
pub(crate) struct HostPorts {
    pub(crate) inputs: HashMap<String, InPort>,
    /// Each `host-out` channel.
    pub(crate) outputs: HashMap<String, OutPort>,
    /// Other tasks woken from outside the pipeline (`engine-out`): their waker slot and id.
    pub(crate) wakers: Vec<(Arc<OnceLock<Waker>>, usize)>,
    /// `call name=NAME` tasks of this pipeline's own service: the name, the task's id, and
    /// where the engine sends the service (the host ports of that name) when it starts.
    pub(crate) calls: Vec<(String, usize, Sender<Arc<OwnService>>)>,
}

impl HostPorts {
    /// Whether `name` is a service that calls of this pipeline take (not the host's).
    pub(crate) fn served(&self, name: &str) -> bool {
        self.calls.iter().any(|(n, _, _)| n == name)
    }

    /// The host's channels among `names` (the services' are the calls'), sorted.
    pub(crate) fn hosts<'a>(&self, names: impl Iterator<Item = &'a String>) -> Vec<String> {
        let mut v: Vec<String> = names.filter(|n| !self.served(n)).cloned().collect();
        v.sort();
        v
    }
}

/// Hands each `call name=NAME` of a starting pipeline its service: the pipeline's host ports
/// of that name (checked when it was built), taken from the host, one service per name.
pub(crate) fn hand_to_calls(host: &mut HostPorts) {
    let mut services: HashMap<String, Arc<OwnService>> = HashMap::new();
    for (name, _, tx) in std::mem::take(&mut host.calls) {
        let service = match services.get(&name) {
            Some(s) => Arc::clone(s),
            None => {
                let ports = host.inputs.remove(&name).map(HostInput::new);
                let Some((input, output)) =
                    ports.zip(host.outputs.remove(&name).map(HostOutput::from_port))
                else {
                    continue; // not there: the graph's checks refuse such a pipeline
                };
                let s = Arc::new(OwnService::new(input, output));
                services.insert(name, Arc::clone(&s));
                s
            }
        };
        let _ = tx.try_send(service);
    }
}
