//! Where messages from peers go at this engine: a pipeline's `host-in`, or a mailbox.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use offhost_link::offload::Router;
use offhost_link::peer::{Deliver, DeliverError};

use crate::daemon::Daemon;
use offhost_engine::{HostError, HostInput};

/// Inputs of pipelines opened so far, by channel name (`None` once ended).
type Inputs = HashMap<String, Arc<Mutex<Option<HostInput>>>>;

/// Why a peer's message for `in/N/NAME` found no pipeline input to go into (the source of a
/// [`DeliverError::Destination`] for that channel).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The channel starts with `in/` but is not `in/N/NAME`.
    #[error("not in/N/NAME")]
    NotInput,
    /// No running pipeline `id` has an open `host-in name=NAME`.
    #[error("no pipeline {id} with an open host-in {name:?} here")]
    NoInput {
        /// The pipeline's id.
        id: u64,
        /// The input's name.
        name: String,
    },
    /// The input has ended (its end of stream came, or the pipeline no longer reads it).
    #[error("the input has ended")]
    Ended,
    /// The input did not take the message.
    #[error(transparent)]
    Host(#[from] HostError),
}

impl InputError {
    fn at(self, channel: &str) -> DeliverError {
        DeliverError::Destination {
            channel: channel.to_owned(),
            source: Box::new(self),
        }
    }
}

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
    ) -> Result<Arc<Mutex<Option<HostInput>>>, InputError> {
        let mut inputs = self.inputs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = inputs.get(channel) {
            return Ok(i.clone());
        }
        let (id, name) = rest
            .split_once('/')
            .and_then(|(id, name)| Some((id.parse::<u64>().ok()?, name)))
            .ok_or(InputError::NotInput)?;
        let input = daemon
            .host_input(id, name)
            .ok_or_else(|| InputError::NoInput {
                id,
                name: name.to_owned(),
            })?;
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
    ) -> Result<(), DeliverError> {
        if let (Some(daemon), Some(rest)) = (&self.daemon, channel.strip_prefix("in/")) {
            let input = self
                .input(daemon, channel, rest)
                .map_err(|e| e.at(channel))?;
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
                        return Err(DeliverError::LinkDown {
                            channel: channel.to_owned(),
                        });
                    }
                }
            };
            let Some(i) = slot.as_mut() else {
                return Err(InputError::Ended.at(channel));
            };
            let r = if msg.is_empty() {
                Ok(())
            } else {
                match i.send_while(msg.to_vec(), live) {
                    Err(HostError::Closed) => Err(HostError::Closed),
                    other => return other.map_err(|e| InputError::from(e).at(channel)),
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
            return r.map_err(|e| InputError::from(e).at(channel));
        }
        self.router.deliver(from, channel, msg, live)
    }
}
