//! Modules a client sends beside its pipelines (`offhost submit --module NAME=FILE`): each
//! on a channel `module/NAME` of its session, kept for that session until it ends, and handed
//! to the pipelines it submits as named blobs (a `wasm module=NAME` task finds it there).
//!
//! On the channel the client sends a header, `{"bytes": N}`, then the module's N bytes in
//! messages of any size; the daemon answers `{"ok": true, "name": NAME, "bytes": N}` once it
//! holds it, or `{"ok": false, "error": ...}`. N is checked against the session's budget
//! (`DaemonLimits::module_bytes`, every module of the session together) before anything is
//! kept, and no message may carry more than N announced.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use offhost_engine::Blobs;
use offhost_link::{Channel, LinkError};
use serde::{Deserialize, Serialize};

use super::keep::SessionId;
use super::reply::Reply;
use crate::refusal::Refusal;

/// How long the daemon waits for each message of a module before it gives up on it.
const MESSAGE_WAIT: Duration = Duration::from_secs(30);

/// The header of a module channel.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Header {
    /// The module's length.
    pub(crate) bytes: u64,
}

/// The daemon's answer once it holds a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleStored {
    /// Its name.
    pub name: String,
    /// Its length.
    pub bytes: u64,
}

/// Each session's modules.
#[derive(Default)]
pub(super) struct Modules(Mutex<HashMap<SessionId, Blobs>>);

impl Modules {
    /// Session `sid`'s modules (none if it sent none).
    pub(super) fn of(&self, sid: Option<SessionId>) -> Blobs {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sid.and_then(|s| m.get(&s).cloned()).unwrap_or_default()
    }

    /// Forgets session `sid`'s modules (it has ended).
    pub(super) fn session_ended(&self, sid: SessionId) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&sid);
    }

    /// Receives module `name` on `ch` for session `sid`, within `limit` bytes for all the
    /// session's modules, and answers on the channel.
    pub(super) fn receive(
        &self,
        ch: &Channel,
        sid: SessionId,
        name: &str,
        limit: u64,
    ) -> Result<(), LinkError> {
        let reply = match self.take(ch, sid, name, limit) {
            Ok(bytes) => Reply::Ok(ModuleStored {
                name: name.to_string(),
                bytes,
            }),
            Err(Refused::Link(e)) => return Err(e),
            Err(Refused::Why(r)) => Reply::Refused(r.to_string()),
        };
        ch.send(reply.to_wire().as_bytes())?;
        ch.close()
    }

    fn take(&self, ch: &Channel, sid: SessionId, name: &str, limit: u64) -> Result<u64, Refused> {
        let bad = |why: String| {
            Refused::Why(Refusal::ModuleProtocol {
                name: name.to_string(),
                why,
            })
        };
        crate::names::check_name(name).map_err(|e| Refused::Why(e.into()))?;
        let next = || match ch.recv_wait(MESSAGE_WAIT) {
            Err(LinkError::Timeout) => Err(bad(format!(
                "nothing came for {} s",
                MESSAGE_WAIT.as_secs()
            ))),
            r => r.map_err(Refused::Link),
        };
        let head = next()?.ok_or_else(|| bad("the channel ended before its header".into()))?;
        let Header { bytes } = serde_json::from_slice(&head)
            .map_err(|e| bad(format!("header (want {{\"bytes\": N}}): {e}")))?;
        // The session's other modules (one of the same name is replaced) and this one.
        let held = {
            let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
            m.get(&sid)
                .map_or(0, |b| b.bytes() - b.get(name).map_or(0, |x| x.len() as u64))
        };
        let total = held.saturating_add(bytes);
        if bytes > limit || total > limit {
            return Err(Refused::Why(Refusal::ModuleTooLarge {
                bytes,
                total,
                limit,
            }));
        }
        let mut module = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
        while (module.len() as u64) < bytes {
            let msg = next()?.ok_or_else(|| {
                bad(format!(
                    "the channel ended after {} of {bytes} bytes",
                    module.len()
                ))
            })?;
            if module.len() as u64 + msg.len() as u64 > bytes {
                return Err(bad(format!("more than the {bytes} bytes announced")));
            }
            module.extend_from_slice(&msg);
        }
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(sid).or_default().insert(name, module.into());
        Ok(bytes)
    }
}

/// Why a module was not taken: the link failed, or the daemon refuses it.
enum Refused {
    Link(LinkError),
    Why(Refusal),
}
