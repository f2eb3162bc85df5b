//! The exported `offhost_engine_add_*_hook` functions: C callbacks run as the queue hooks a
//! pipeline names (`queue[put=NAME]`, `queue[get=NAME]`). Pointers are checked and converted
//! here, each `unsafe` block with its reason, as in the rest of the FFI edge.

use std::ffi::{c_char, c_void, CString};

use super::{call, handle, text};
use crate::api::offhost_engine;
use crate::status::offhost_status;

/// The most bytes one call of a get hook may hand back (`cap` of [`offhost_get_hook`]).
pub const OFFHOST_GET_HOOK_MAX: usize = 64 * 1024;

/// A put hook: called with the `user` pointer given when it was added and the queue's name
/// (valid during the call) each time a buffer lands on the queue while it was empty, on an
/// engine worker thread.
#[allow(non_camel_case_types)]
pub type offhost_put_hook = Option<unsafe extern "C" fn(user: *mut c_void, queue: *const c_char)>;

/// A get hook: called with `user` and the queue's name before a dequeue from the empty
/// queue; writes at most `cap` bytes to `buf` and returns how many, which are dequeued as a
/// buffer, or returns a negative number for nothing (a queue no task writes then ends).
#[allow(non_camel_case_types)]
pub type offhost_get_hook = Option<
    unsafe extern "C" fn(user: *mut c_void, queue: *const c_char, buf: *mut u8, cap: usize) -> i64,
>;

/// The caller's `user` pointer, handed to its callback on engine worker threads.
#[derive(Clone, Copy)]
struct User(*mut c_void);
// SAFETY: the caller of `offhost_engine_add_*_hook` promises that its callback may be called
// with `user` from any thread, at the same time from several (the header says so); the
// binding itself never reads through the pointer.
unsafe impl Send for User {}
// SAFETY: as for `Send`: shared use is the callback's, which the caller made thread-safe.
unsafe impl Sync for User {}

/// The engine, the hook's name and the hook of an `offhost_engine_add_*_hook` call, each
/// checked.
///
/// # Safety
/// `engine` is NULL or a live engine; `name` NULL or a NUL-terminated string.
unsafe fn checked<'a, H>(
    engine: *const offhost_engine,
    name: *const c_char,
    hook: Option<H>,
) -> Result<(&'a offhost_engine, &'a str, H), offhost_bindings::Error> {
    // SAFETY: as the caller promises.
    let (e, n) = unsafe { (handle(engine, "engine")?, text(name, "name")?) };
    let hook = hook.ok_or_else(|| offhost_bindings::Error::Invalid("hook is NULL".into()))?;
    Ok((e, n, hook))
}

/// Adds put hook `name` to `engine` (the embedded engine only): `hook(user, queue)` runs
/// each time a buffer lands on a queue written `queue[put=NAME]` while it was empty.
/// `INVALID_ARGUMENT` for a daemon's engine handle, a NULL hook or a name the language
/// cannot write.
///
/// # Safety
/// `engine` is a live engine; `name` a NUL-terminated string; `hook` may be called with
/// `user` from any thread, from several at once, for as long as a pipeline of `engine` runs.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_add_put_hook(
    engine: *const offhost_engine,
    name: *const c_char,
    hook: offhost_put_hook,
    user: *mut c_void,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (e, n, hook) = unsafe { checked(engine, name, hook) }?;
        let user = User(user);
        e.inner.add_put_hook(n, move |queue| {
            let user = user;
            let Ok(q) = CString::new(queue) else { return };
            // SAFETY: the caller promised `hook` may be called with `user` from this thread;
            // `q` is NUL-terminated and lives through the call.
            unsafe { hook(user.0, q.as_ptr()) }
        })?;
        Ok(offhost_status::Ok)
    })
}

/// Adds get hook `name` to `engine` (the embedded engine only): `hook(user, queue, buf,
/// cap)` runs before a dequeue from an empty queue written `queue[get=NAME]`, with `cap` =
/// `OFFHOST_GET_HOOK_MAX`; the bytes it writes are dequeued as a buffer. A count above `cap`
/// is taken as nothing. `INVALID_ARGUMENT` as for the put hook.
///
/// # Safety
/// As [`offhost_engine_add_put_hook`]; `hook` writes no more than `cap` bytes to `buf`.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_add_get_hook(
    engine: *const offhost_engine,
    name: *const c_char,
    hook: offhost_get_hook,
    user: *mut c_void,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (e, n, hook) = unsafe { checked(engine, name, hook) }?;
        let user = User(user);
        // One scratch buffer per hook for the callback to write into (calls from several
        // workers take turns); the buffer dequeued holds only the bytes written.
        let scratch = std::sync::Mutex::new(vec![0u8; OFFHOST_GET_HOOK_MAX]);
        e.inner.add_get_hook(n, move |queue| {
            let user = user;
            let q = CString::new(queue).ok()?;
            let mut buf = scratch.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: as for the put hook; `buf` has `cap` writable bytes, which the caller
            // promised `hook` stays within.
            let n = unsafe { hook(user.0, q.as_ptr(), buf.as_mut_ptr(), buf.len()) };
            buf.get(..usize::try_from(n).ok()?).map(<[u8]>::to_vec)
        })?;
        Ok(offhost_status::Ok)
    })
}
