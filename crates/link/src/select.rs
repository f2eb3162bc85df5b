//! `select`: the CSP ALT over channels of any sessions and transports.
//!
//! A session's waiters read its transport themselves (see `driver`), so one thread cannot
//! block on two sessions at once. Channels of one session are waited for as before, by this
//! thread on that session's driver. Channels of several sessions get one waiting thread per
//! session; the first to see a channel ready tells the caller and the others, which end at
//! their next look (at once when they sleep, within the driver's read slice when they read).
//!
//! Fairness: when several channels are ready, the one returned goes round in turn (a counter
//! shared by every select), so no ready channel is passed over for ever by a busier one
//! listed before it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::channel::Channel;
use crate::driver::{Deadline, Driver, State};
use crate::error::LinkError;

/// The most sessions one select waits on (one thread each).
pub const MAX_SELECT_SESSIONS: usize = 64;

/// Turns of the fair choice among ready channels, shared by every select.
static TURN: AtomicUsize = AtomicUsize::new(0);

/// Whether channel `id` has a message, its end of stream, or a held message ready.
fn ready_in(st: &State, id: u32) -> bool {
    st.conn.readable(id) || st.held.contains_key(&id)
}

/// One of `ready` (not empty), in turn.
fn fair(ready: &[usize]) -> usize {
    ready[TURN.fetch_add(1, Ordering::Relaxed) % ready.len()]
}

/// The channels of one session: its driver and, per channel, the index in the caller's list
/// and the channel id.
struct Group {
    driver: Arc<Driver>,
    members: Vec<(usize, u32)>,
}

fn groups(channels: &[&Channel]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for (i, c) in channels.iter().enumerate() {
        match out
            .iter_mut()
            .find(|g| Arc::ptr_eq(&g.driver, &c.handle.driver))
        {
            Some(g) => g.members.push((i, c.id)),
            None => out.push(Group {
                driver: Arc::clone(&c.handle.driver),
                members: vec![(i, c.id)],
            }),
        }
    }
    out
}

/// The indices of the channels ready now, looking at each session once.
fn ready_now(groups: &[Group]) -> Vec<usize> {
    let mut ready = Vec::new();
    for g in groups {
        let st = g.driver.lock();
        ready.extend(g.members.iter().filter(|m| ready_in(&st, m.1)).map(|m| m.0));
    }
    ready.sort_unstable();
    ready
}

/// Waits until one of `channels` has a message (or its end of stream) and returns its index
/// (the CSP ALT); when several are ready, each in turn. The channels may belong to any
/// sessions over any transports (`mem:`, `shm:`, `unix:`, `tcp:`, `tls:` at once).
///
/// `timeout` `None` waits for ever; `Some(Duration::ZERO)` looks once and returns
/// [`LinkError::WouldBlock`] when none is ready (the ALT's default branch); otherwise
/// [`LinkError::Timeout`] once it has passed. A session that fails ends the select with its
/// error. [`LinkError::BadSelect`] for an empty list or more than [`MAX_SELECT_SESSIONS`]
/// sessions.
pub fn select(channels: &[&Channel], timeout: Option<Duration>) -> Result<usize, LinkError> {
    let groups = groups(channels);
    if groups.is_empty() || groups.len() > MAX_SELECT_SESSIONS {
        return Err(LinkError::BadSelect);
    }
    let ready = ready_now(&groups);
    if !ready.is_empty() {
        return Ok(fair(&ready));
    }
    if timeout == Some(Duration::ZERO) {
        return Err(LinkError::WouldBlock);
    }
    let deadline = Deadline::after(timeout);
    if let [g] = &groups[..] {
        return g.driver.wait(deadline, |st| {
            let ready: Vec<usize> = g
                .members
                .iter()
                .filter(|m| ready_in(st, m.1))
                .map(|m| m.0)
                .collect();
            (!ready.is_empty()).then(|| Ok(fair(&ready)))
        });
    }
    let until = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        if let Some(i) = across(&groups, until)? {
            return Ok(i);
        }
    }
}

/// Waits on several sessions, a thread each, until one has a ready channel (`until`: the
/// time limit, `None` for ever); `None` when another thread took the message the waiting
/// thread saw, and there is time left to wait again.
fn across(groups: &[Group], until: Option<Instant>) -> Result<Option<usize>, LinkError> {
    let deadline = until.map_or(Deadline::Never, Deadline::At);
    let done = Arc::new(AtomicBool::new(false));
    let drivers: Arc<Vec<Arc<Driver>>> =
        Arc::new(groups.iter().map(|g| g.driver.clone()).collect());
    let (tx, rx) = mpsc::channel::<Result<(), LinkError>>();
    let stop = |done: &AtomicBool, drivers: &[Arc<Driver>]| {
        // Ordering: Release pairs with the Acquire loads in the waiters' looks.
        done.store(true, Ordering::Release);
        for d in drivers {
            d.cond.notify_all();
        }
    };
    for (k, g) in groups.iter().enumerate() {
        let (driver, ids) = (
            Arc::clone(&g.driver),
            g.members.iter().map(|m| m.1).collect::<Vec<_>>(),
        );
        let (done_k, drivers_k, tx) = (Arc::clone(&done), Arc::clone(&drivers), tx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("offhost-select-{k}"))
            .spawn(move || {
                let r = driver.wait(deadline, |st| {
                    if ids.iter().any(|&id| ready_in(st, id)) {
                        return Some(Ok(true));
                    }
                    // Ordering: Acquire pairs with the Release store in `stop`.
                    done_k.load(Ordering::Acquire).then_some(Ok(false))
                });
                match r {
                    Ok(false) => {}
                    Ok(true) => {
                        stop(&done_k, &drivers_k);
                        let _ = tx.send(Ok(()));
                    }
                    Err(LinkError::Timeout) => {
                        let _ = tx.send(Err(LinkError::Timeout));
                    }
                    Err(e) => {
                        stop(&done_k, &drivers_k);
                        let _ = tx.send(Err(e));
                    }
                }
            });
        if let Err(e) = spawned {
            stop(&done, &drivers);
            return Err(LinkError::io("start a select thread", e));
        }
    }
    drop(tx);
    loop {
        let got = match until {
            Some(t) => rx.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(Ok(())) => {
                stop(&done, &drivers);
                let ready = ready_now(groups);
                if !ready.is_empty() {
                    return Ok(Some(fair(&ready)));
                }
                // Taken meanwhile by another thread's receive: the others were stopped; the
                // caller waits again for what is left of the time.
                if until.is_some_and(|t| Instant::now() >= t) {
                    return Err(LinkError::Timeout);
                }
                return Ok(None);
            }
            Ok(Err(LinkError::Timeout)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                stop(&done, &drivers);
                return Err(LinkError::Timeout);
            }
        }
    }
}
