//! Where messages from peers go at this engine: a pipeline's `host-in`, or a mailbox.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use offhost_link::offload::Router;
use offhost_link::peer::Deliver;

use crate::daemon::Daemon;
use offhost_engine::HostInput;

/// Inputs of pipelines opened so far, by channel name (`None` once ended).
type Inputs = HashMap<String, Arc<Mutex<Option<HostInput>>>>;

/// Delivers `in/N/NAME` to `host-in name=NAME` of the daemon's pipeline N (an empty message
/// ends that input), anything else to the router's mailboxes.
pub struct EngineDeliver {
    router: Arc<Router>,
    daemon: Option<Arc<Daemon>>,
    inputs: Mutex<Inputs>,
}

impl std::fmt::Debug for EngineDeliver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineDeliver").finish_non_exhaustive()
    }
}

impl EngineDeliver {
    /// Deliveries to `router`, and to `daemon`'s pipelines if there is one.
    pub fn new(router: Arc<Router>, daemon: Option<Arc<Daemon>>) -> EngineDeliver {
        EngineDeliver {
            router,
            daemon,
            inputs: Mutex::new(HashMap::new()),
        }
    }

    fn input(
        &self,
        daemon: &Daemon,
        channel: &str,
        rest: &str,
    ) -> Result<Arc<Mutex<Option<HostInput>>>, String> {
        let mut inputs = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = inputs.get(channel) {
            return Ok(i.clone());
        }
        let (id, name) = rest
            .split_once('/')
            .and_then(|(id, name)| Some((id.parse::<u64>().ok()?, name)))
            .ok_or_else(|| format!("{channel:?} is not in/N/NAME"))?;
        let input = daemon
            .host_input(id, name)
            .ok_or_else(|| format!("no pipeline {id} with an open host-in {name:?} here"))?;
        let i = Arc::new(Mutex::new(Some(input)));
        inputs.insert(channel.to_owned(), i.clone());
        Ok(i)
    }
}

impl Deliver for EngineDeliver {
    fn deliver(
        &self,
        from: &str,
        channel: &str,
        msg: &[u8],
        live: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        if let (Some(daemon), Some(rest)) = (&self.daemon, channel.strip_prefix("in/")) {
            let input = self.input(daemon, channel, rest)?;
            // Another stream to the same input may hold it while it waits for room: wait
            // for it only while this stream's link is up.
            let mut slot = loop {
                match input.try_lock() {
                    Ok(slot) => break slot,
                    Err(TryLockError::Poisoned(e)) => break e.into_inner(),
                    Err(TryLockError::WouldBlock) if live() => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(TryLockError::WouldBlock) => {
                        return Err(format!("the link went down while {channel} was busy"));
                    }
                }
            };
            let Some(i) = slot.as_mut() else {
                return Err(format!("{channel} has ended"));
            };
            let r = if msg.is_empty() {
                Ok(())
            } else {
                match i.send_while(msg.to_vec(), live) {
                    Err(offhost_engine::HostError::Closed) => {
                        Err(offhost_engine::HostError::Closed)
                    }
                    other => return other.map_err(|e| format!("{channel}: {e}")),
                }
            };
            // The input ended (its end of stream, or the pipeline no longer reads it): it
            // leaves the table, which would otherwise keep every input ever fed.
            *slot = None;
            drop(slot);
            self.inputs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(channel);
            return r.map_err(|e| format!("{channel}: {e}"));
        }
        self.router.deliver(from, channel, msg, live)
    }
}
