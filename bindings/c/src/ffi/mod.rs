//! The exported functions: the FFI edge. Each checks and converts its pointers (the only
//! `unsafe` code of the binding, every block with its `SAFETY` reason), calls `api`, and
//! turns the result into an `offhost_status`; a panic becomes `OFFHOST_STATUS_PANIC`.

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use offhost_bindings::Error;

mod hooks;
mod queue;

pub use hooks::*;
pub use queue::*;

use crate::api::{
    self, offhost_access, offhost_channel, offhost_channel_options, offhost_engine, offhost_loan,
    offhost_message, offhost_pipeline, offhost_server, offhost_session, Received,
};
use crate::status::{
    fail, invalid, last_limit, last_message, last_setting, offhost_status, set_message,
};

/// Runs `f`, recording its error or panic.
fn call(f: impl FnOnce() -> Result<offhost_status, Error>) -> offhost_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => fail(&e),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            set_message(&format!("offhost panicked: {what}"));
            offhost_status::Panic
        }
    }
}

/// The text of a C string argument.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that stays valid for `'a`.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string living for 'a.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map_err(|_| invalid(format!("{what} is not UTF-8")))
}

/// The link options of `access` (NULL: the defaults).
///
/// # Safety
/// `access` is NULL or points to a valid `offhost_access` whose `tls_certificates` is NULL
/// or a NUL-terminated string.
unsafe fn options(access: *const offhost_access) -> Result<offhost_link::LinkOptions, Error> {
    // SAFETY: the caller promises NULL or a valid struct.
    let Some(a) = (unsafe { access.as_ref() }) else {
        return Ok(api::link_options(None, false));
    };
    let dir = if a.tls_certificates.is_null() {
        None
    } else {
        // SAFETY: non-null, and the caller promises a NUL-terminated string.
        Some(unsafe { text(a.tls_certificates, "access.tls_certificates") }?)
    };
    Ok(api::link_options(dir, a.insecure != 0))
}

/// A shared reference to a handle.
///
/// # Safety
/// `p` is null or a handle made by this library and not yet freed.
unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, Error> {
    // SAFETY: the caller promises a live handle (or null, which `as_ref` turns into None).
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// Bytes the caller passes in.
///
/// # Safety
/// `p` is null (then `len` must be 0) or points to `len` readable bytes valid for `'a`.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], Error> {
    if p.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(invalid("data is NULL"))
        };
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes living for 'a.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// A buffer the caller lends for writing.
///
/// # Safety
/// `p` is null (then `cap` must be 0) or points to `cap` writable bytes valid for `'a`,
/// not used elsewhere meanwhile.
unsafe fn buffer<'a>(p: *mut u8, cap: usize) -> Result<&'a mut [u8], Error> {
    if p.is_null() {
        return if cap == 0 {
            Ok(&mut [])
        } else {
            Err(invalid("buffer is NULL"))
        };
    }
    // SAFETY: non-null, and the caller promises `cap` writable bytes, exclusively ours.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, cap) })
}

/// Stores a value through an out-pointer.
///
/// # Safety
/// `out` is null or points to writable storage for a `T`.
unsafe fn put<T>(out: *mut T, v: T) -> Result<(), Error> {
    if out.is_null() {
        return Err(invalid("out-pointer is NULL"));
    }
    // SAFETY: non-null and writable, as the caller promises; the old value is not read.
    unsafe { out.write(v) };
    Ok(())
}

/// Stores a new handle through an out-pointer.
///
/// # Safety
/// As [`put`].
unsafe fn put_handle<T>(out: *mut *mut T, v: T) -> Result<offhost_status, Error> {
    if out.is_null() {
        return Err(invalid("out-pointer is NULL"));
    }
    // SAFETY: checked non-null above; writable as the caller promises.
    unsafe { out.write(Box::into_raw(Box::new(v))) };
    Ok(offhost_status::Ok)
}

/// Takes back a handle the caller gives up (it is freed with the value).
///
/// # Safety
/// `p` is null or a handle made by this library, not freed before and not used after.
unsafe fn take<T>(p: *mut T, what: &str) -> Result<T, Error> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: made by Box::into_raw in `put_handle`, taken once, as the caller promises.
    Ok(*unsafe { Box::from_raw(p) })
}

/// Frees a handle.
///
/// # Safety
/// `p` is null or a handle made by this library, not freed before and not used after.
unsafe fn free<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: made by Box::into_raw in `put_handle`, freed once, as the caller promises.
        let b = unsafe { Box::from_raw(p) };
        // A panic while it ends (a pipeline stopped, a session closed) stops here: unwinding
        // out of an `extern "C"` function aborts the caller's process.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| drop(b))) {
            set_message(&format!(
                "offhost panicked: {}",
                offhost_bindings::panic_message(p.as_ref())
            ));
        }
    }
}

/// Stores a string for the caller (freed with `offhost_string_free`).
///
/// # Safety
/// As [`put`].
unsafe fn put_string(out: *mut *mut c_char, s: String) -> Result<offhost_status, Error> {
    let c = CString::new(s).map_err(|_| invalid("text holds a NUL byte"))?;
    // SAFETY: as the caller promises for `out`.
    unsafe { put(out, c.into_raw()) }?;
    Ok(offhost_status::Ok)
}

/// A receive's result as a status, its length stored.
///
/// # Safety
/// As [`put`] for `len`.
unsafe fn received(r: Received, len: *mut usize) -> Result<offhost_status, Error> {
    let (n, status) = match r {
        Received::Copied(n) => (n, offhost_status::Ok),
        Received::End => (0, offhost_status::End),
        Received::TooSmall(n) => {
            set_message(&format!(
                "message of {n} bytes does not fit the buffer (it stays queued)"
            ));
            (n, offhost_status::TooLarge)
        }
    };
    // SAFETY: as the caller promises.
    unsafe { put(len, n) }?;
    Ok(status)
}

/// The message of the last failing call on this thread (empty if none). Valid until the
/// next failing call on this thread.
#[no_mangle]
pub extern "C" fn offhost_last_error() -> *const c_char {
    last_message()
}

/// The id of the limit the last failing call on this thread went over (`"max_workers"`, as
/// its message names it; no parameter of this library raises a limit), or empty if it went
/// over none or reached us as an engine's text. Valid until the next failing call on this
/// thread.
#[no_mangle]
pub extern "C" fn offhost_last_limit() -> *const c_char {
    last_limit()
}

/// The id of the setting that would have allowed what the last failing call on this thread
/// was refused (`"tls_certificates"`, `"insecure"`: the field of `offhost_access` that sets
/// it, as its message names it), or empty if none. Valid until the next failing call on
/// this thread.
#[no_mangle]
pub extern "C" fn offhost_last_setting() -> *const c_char {
    last_setting()
}

/// The name of a status code, as a static string.
#[no_mangle]
pub extern "C" fn offhost_status_name(status: offhost_status) -> *const c_char {
    status.name().as_ptr()
}

/// Fills `opts` with the default channel options (1 MiB messages, 16 KiB packets, async).
///
/// # Safety
/// `opts` points to writable storage for the options.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_options_default(
    opts: *mut offhost_channel_options,
) -> offhost_status {
    // SAFETY: as the caller promises for `opts`.
    call(|| unsafe { put(opts, offhost_channel_options::default()) }.map(|_| offhost_status::Ok))
}

/// Connects to an engine at `url` (`shm:PATH`, `shm:@name`, `unix:PATH`, `tcp:HOST:PORT`);
/// for `tls:HOST:PORT` use `offhost_session_connect_with`.
///
/// # Safety
/// `url` is a NUL-terminated string; `out` points to storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_connect(
    url: *const c_char,
    out: *mut *mut offhost_session,
) -> offhost_status {
    // SAFETY: as the caller promises; no access struct.
    unsafe { offhost_session_connect_with(url, std::ptr::null(), out) }
}

/// Connects to an engine at `url` with `access` (NULL: the defaults): `tls:HOST:PORT` needs
/// its `tls_certificates`.
///
/// # Safety
/// `url` is a NUL-terminated string; `access` NULL or valid (see `offhost_access`); `out`
/// points to storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_connect_with(
    url: *const c_char,
    access: *const offhost_access,
    out: *mut *mut offhost_session,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `url` and `access`.
        let (url, options) = unsafe { (text(url, "url")?, options(access)?) };
        let s = api::connect(url, &options)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, s) }
    })
}

/// Opens a channel named `name` with `opts` (NULL: the defaults).
///
/// # Safety
/// `session` is a live session; `name` a NUL-terminated string; `opts` NULL or valid
/// options; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_open(
    session: *const offhost_session,
    name: *const c_char,
    opts: *const offhost_channel_options,
    out: *mut *mut offhost_channel,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for each pointer.
        let (s, name, opts) = unsafe {
            (
                handle(session, "session")?,
                text(name, "name")?,
                opts.as_ref().copied().unwrap_or_default(),
            )
        };
        let ch = s.open(name, opts)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, ch) }
    })
}

/// Waits (at most `timeout_ms`) for the next channel the peer opens.
///
/// # Safety
/// `session` is a live session; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_accept(
    session: *const offhost_session,
    timeout_ms: i64,
    out: *mut *mut offhost_channel,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let s = unsafe { handle(session, "session") }?;
        let ch = s.accept(timeout_ms)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, ch) }
    })
}

/// Says goodbye: the peer sees the end of every channel; later calls fail.
///
/// # Safety
/// `session` is a live session.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_close(session: *const offhost_session) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(session, "session") }?.inner.close();
        Ok(offhost_status::Ok)
    })
}

/// Frees a session (its channels stay usable until freed themselves).
///
/// # Safety
/// `session` is NULL or a session not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_session_free(session: *mut offhost_session) {
    // SAFETY: as the caller promises.
    unsafe { free(session) }
}

/// Listens at `url` for sessions (an engine's side): `unix:`, `shm:`, `mem:`; `tls:` and
/// plain `tcp:` need `offhost_server_bind_with`.
///
/// # Safety
/// `url` is a NUL-terminated string; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_server_bind(
    url: *const c_char,
    out: *mut *mut offhost_server,
) -> offhost_status {
    // SAFETY: as the caller promises; no access struct.
    unsafe { offhost_server_bind_with(url, std::ptr::null(), out) }
}

/// Listens at `url` with `access` (NULL: the defaults): `tls:HOST:PORT` needs its
/// `tls_certificates` and admits only clients with a certificate of that CA; plain `tcp:`
/// needs `insecure`. Unix and shm listeners admit only peers of our uid.
///
/// # Safety
/// `url` is a NUL-terminated string; `access` NULL or valid (see `offhost_access`); `out`
/// storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_server_bind_with(
    url: *const c_char,
    access: *const offhost_access,
    out: *mut *mut offhost_server,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `url` and `access`.
        let (url, options) = unsafe { (text(url, "url")?, options(access)?) };
        let s = api::bind(url, &options)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, s) }
    })
}

/// The URL a server listens at (with the port a `tcp:HOST:0` got); valid while it lives.
///
/// # Safety
/// `server` is a live server.
#[no_mangle]
pub unsafe extern "C" fn offhost_server_url(server: *const offhost_server) -> *const c_char {
    // SAFETY: as the caller promises.
    match unsafe { server.as_ref() } {
        Some(s) => s.url.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// Waits for the next session.
///
/// # Safety
/// `server` is a live server; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_server_accept(
    server: *const offhost_server,
    out: *mut *mut offhost_session,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let s = unsafe { handle(server, "server") }?.accept()?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, s) }
    })
}

/// Stops listening and frees the server.
///
/// # Safety
/// `server` is NULL or a server not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_server_free(server: *mut offhost_server) {
    // SAFETY: as the caller promises.
    unsafe { free(server) }
}

/// Sends `len` bytes, waiting for credit at most `timeout_ms` (0: only if it fits now).
///
/// # Safety
/// `channel` is a live channel; `data` points to `len` bytes (or is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_send(
    channel: *const offhost_channel,
    data: *const u8,
    len: usize,
    timeout_ms: i64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (ch, data) = unsafe { (handle(channel, "channel")?, bytes(data, len)?) };
        ch.send(data, timeout_ms)?;
        Ok(offhost_status::Ok)
    })
}

/// Receives the next message into `buf` (`cap` bytes) and stores its length in `len`;
/// `END` at the end of the stream; `TOO_LARGE` with the length it needs if it does not fit
/// (it stays queued for the next receive).
///
/// # Safety
/// `channel` is a live channel; `buf` points to `cap` writable bytes; `len` to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_recv(
    channel: *const offhost_channel,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    timeout_ms: i64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (ch, buf) = unsafe { (handle(channel, "channel")?, buffer(buf, cap)?) };
        let r = ch.recv(buf, timeout_ms)?;
        // SAFETY: as the caller promises for `len`.
        unsafe { received(r, len) }
    })
}

/// Receives the next message as it arrived: a loan stays in shared memory, read in place
/// through `offhost_message_data` until `offhost_message_free`. `END` at the end.
///
/// # Safety
/// `channel` is a live channel; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_recv_message(
    channel: *const offhost_channel,
    timeout_ms: i64,
    out: *mut *mut offhost_message,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let ch = unsafe { handle(channel, "channel") }?;
        match ch.recv_message(timeout_ms)? {
            // SAFETY: as the caller promises for `out`.
            Some(m) => unsafe { put_handle(out, m) },
            None => Ok(offhost_status::End),
        }
    })
}

/// Ends this side's sending direction; receiving goes on.
///
/// # Safety
/// `channel` is a live channel.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_close(channel: *const offhost_channel) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(channel, "channel") }?.inner.close()?;
        Ok(offhost_status::Ok)
    })
}

/// Frees a channel (ending its sending direction).
///
/// # Safety
/// `channel` is NULL or a channel not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_free(channel: *mut offhost_channel) {
    // SAFETY: as the caller promises.
    unsafe { free(channel) }
}

/// Waits until one of `count` channels (of any sessions and transports) has a message or
/// its end, and stores its index in `ready`; when several are ready, each in turn.
/// `timeout_ms` 0 looks once (`WOULD_BLOCK` when none is ready: the ALT's default branch).
///
/// # Safety
/// `channels` points to `count` live channels; `ready` to a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_select(
    channels: *const *const offhost_channel,
    count: usize,
    timeout_ms: i64,
    ready: *mut usize,
) -> offhost_status {
    call(|| {
        if channels.is_null() {
            return Err(invalid("channels is NULL"));
        }
        // SAFETY: non-null; the caller promises `count` channel pointers.
        let ptrs = unsafe { std::slice::from_raw_parts(channels, count) };
        let chs = ptrs
            .iter()
            // SAFETY: each a live channel, as the caller promises.
            .map(|&p| unsafe { handle(p, "channel") })
            .collect::<Result<Vec<_>, _>>()?;
        let i = api::select(&chs, timeout_ms)?;
        // SAFETY: as the caller promises for `ready`.
        unsafe { put(ready, i) }?;
        Ok(offhost_status::Ok)
    })
}

/// Borrows a buffer of the shared pool (shm only), waiting at most `timeout_ms`.
///
/// # Safety
/// `channel` is a live channel; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_loan(
    channel: *const offhost_channel,
    timeout_ms: i64,
    out: *mut *mut offhost_loan,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let l = unsafe { handle(channel, "channel") }?.loan(timeout_ms)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, l) }
    })
}

/// The loan's memory (`offhost_loan_capacity` bytes), writable until it is sent or freed.
///
/// # Safety
/// `loan` is a live loan.
#[no_mangle]
pub unsafe extern "C" fn offhost_loan_data(loan: *mut offhost_loan) -> *mut u8 {
    // SAFETY: as the caller promises.
    match unsafe { loan.as_mut() } {
        Some(l) => l.inner.as_mut_ptr(),
        None => std::ptr::null_mut(),
    }
}

/// The loan's size in bytes.
///
/// # Safety
/// `loan` is a live loan.
#[no_mangle]
pub unsafe extern "C" fn offhost_loan_capacity(loan: *const offhost_loan) -> usize {
    // SAFETY: as the caller promises.
    unsafe { loan.as_ref() }.map_or(0, |l| l.inner.capacity())
}

/// Sends the first `len` bytes of a loan by descriptor, without copying. The loan is
/// consumed (freed) whatever the outcome.
///
/// # Safety
/// `channel` is a live channel; `loan` a live loan, not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_channel_send_loan(
    channel: *const offhost_channel,
    loan: *mut offhost_loan,
    len: usize,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises: a live loan, consumed here.
        let loan = unsafe { take(loan, "loan") }?;
        // SAFETY: as the caller promises.
        let ch = unsafe { handle(channel, "channel") }?;
        ch.send_loan(loan, len)?;
        Ok(offhost_status::Ok)
    })
}

/// Returns an unsent loan to the pool.
///
/// # Safety
/// `loan` is NULL or a loan not sent, not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_loan_free(loan: *mut offhost_loan) {
    // SAFETY: as the caller promises.
    unsafe { free(loan) }
}

/// The message's bytes (`offhost_message_len` of them), valid until it is freed.
///
/// # Safety
/// `message` is a live message.
#[no_mangle]
pub unsafe extern "C" fn offhost_message_data(message: *const offhost_message) -> *const u8 {
    // SAFETY: as the caller promises.
    unsafe { message.as_ref() }.map_or(std::ptr::null(), |m| m.inner.as_ptr())
}

/// The message's length in bytes.
///
/// # Safety
/// `message` is a live message.
#[no_mangle]
pub unsafe extern "C" fn offhost_message_len(message: *const offhost_message) -> usize {
    // SAFETY: as the caller promises.
    unsafe { message.as_ref() }.map_or(0, |m| m.inner.len())
}

/// Whether the message is a loan read in place (1) or bytes (0).
///
/// # Safety
/// `message` is a live message.
#[no_mangle]
pub unsafe extern "C" fn offhost_message_is_loan(message: *const offhost_message) -> u8 {
    // SAFETY: as the caller promises.
    let m = unsafe { message.as_ref() };
    u8::from(matches!(
        m.map(|m| &m.inner),
        Some(offhost_link::Message::Loan(_))
    ))
}

/// Frees a message (a loan goes back to the pool).
///
/// # Safety
/// `message` is NULL or a message not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_message_free(message: *mut offhost_message) {
    // SAFETY: as the caller promises.
    unsafe { free(message) }
}

/// The embedded engine: pipelines on `workers` threads of this process (0: the default; more
/// than 64, the pipeline budget's, is `INVALID_ARGUMENT`), with the built-in and PET tasks.
///
/// # Safety
/// `out` is storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_embedded(
    workers: usize,
    out: *mut *mut offhost_engine,
) -> offhost_status {
    call(|| {
        let e = offhost_engine::embedded(workers)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, e) }
    })
}

/// Connects to an engine daemon (`offhost engine --listen URL`).
///
/// # Safety
/// `url` is a NUL-terminated string; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_connect(
    url: *const c_char,
    out: *mut *mut offhost_engine,
) -> offhost_status {
    // SAFETY: as the caller promises; no access struct.
    unsafe { offhost_engine_connect_with(url, std::ptr::null(), out) }
}

/// Connects to an engine daemon with `access` (NULL: the defaults; `tls:` URLs need its
/// `tls_certificates`).
///
/// # Safety
/// `url` is a NUL-terminated string; `access` NULL or valid (see `offhost_access`); `out`
/// storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_connect_with(
    url: *const c_char,
    access: *const offhost_access,
    out: *mut *mut offhost_engine,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `url` and `access`.
        let (url, options) = unsafe { (text(url, "url")?, options(access)?) };
        let e = offhost_engine::connect(url, &options)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, e) }
    })
}

/// Checks and starts pipeline `text`; `PIPELINE` (or `ENGINE` from a daemon) with the line
/// and column of a mistake.
///
/// # Safety
/// `engine` is a live engine; `text` a NUL-terminated string; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_submit(
    engine: *const offhost_engine,
    text: *const c_char,
    out: *mut *mut offhost_pipeline,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (e, t) = unsafe { (handle(engine, "engine")?, self::text(text, "text")?) };
        let p = e.submit(t, None)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, p) }
    })
}

/// As [`offhost_engine_submit`], on an engine daemon under `name`: other engines' `call
/// ... pipeline=NAME` and `offhost submit --stop NAME` find the pipeline by it. `ENGINE`
/// when the daemon refuses the name (malformed, or held by a running pipeline: the message
/// says which); `INVALID_ARGUMENT` on the embedded engine, which takes no name.
///
/// # Safety
/// `engine` is a live engine; `text` and `name` NUL-terminated strings; `out` storage for
/// the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_submit_named(
    engine: *const offhost_engine,
    text: *const c_char,
    name: *const c_char,
    out: *mut *mut offhost_pipeline,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (e, t, n) = unsafe {
            (
                handle(engine, "engine")?,
                self::text(text, "text")?,
                self::text(name, "name")?,
            )
        };
        let p = e.submit(t, Some(n))?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, p) }
    })
}

/// Adds WebAssembly module `data` (`len` bytes) as `name`: the pipelines `engine` submits
/// from now on run it as `wasm module=NAME`. On a daemon it is sent on the engine handle's
/// session and kept for it; `ENGINE` when the daemon refuses it (past its
/// `max_module_bytes`: the message names the limit).
///
/// # Safety
/// `engine` is a live engine; `name` a NUL-terminated string; `data` NULL with `len` 0, or
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_add_module(
    engine: *const offhost_engine,
    name: *const c_char,
    data: *const u8,
    len: usize,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (e, n, d) = unsafe {
            (
                handle(engine, "engine")?,
                text(name, "name")?,
                bytes(data, len)?,
            )
        };
        e.inner.add_module(n, d)?;
        Ok(offhost_status::Ok)
    })
}

/// Frees an engine handle (its pipelines run on).
///
/// # Safety
/// `engine` is NULL or an engine not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_engine_free(engine: *mut offhost_engine) {
    // SAFETY: as the caller promises.
    unsafe { free(engine) }
}

/// Sends `len` bytes to `host-in name=NAME`, waiting while the pipeline is behind.
///
/// # Safety
/// `pipeline` is a live pipeline; `name` a NUL-terminated string; `data` `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_send(
    pipeline: *const offhost_pipeline,
    name: *const c_char,
    data: *const u8,
    len: usize,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (p, n, d) = unsafe {
            (
                handle(pipeline, "pipeline")?,
                text(name, "name")?,
                bytes(data, len)?,
            )
        };
        p.inner.send(n, d.to_vec())?;
        Ok(offhost_status::Ok)
    })
}

/// Ends the stream of `host-in name=NAME`.
///
/// # Safety
/// `pipeline` is a live pipeline; `name` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_close_input(
    pipeline: *const offhost_pipeline,
    name: *const c_char,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (p, n) = unsafe { (handle(pipeline, "pipeline")?, text(name, "name")?) };
        p.inner.close_input(n)?;
        Ok(offhost_status::Ok)
    })
}

/// Receives the next buffer of `host-out name=NAME` into `buf` (as
/// `offhost_channel_recv`: `END` at its end, `TOO_LARGE` with the length it needs).
///
/// # Safety
/// `pipeline` is a live pipeline; `name` a NUL-terminated string; `buf` `cap` writable
/// bytes; `len` a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_recv(
    pipeline: *const offhost_pipeline,
    name: *const c_char,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    timeout_ms: i64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let (p, n, b) = unsafe {
            (
                handle(pipeline, "pipeline")?,
                text(name, "name")?,
                buffer(buf, cap)?,
            )
        };
        let r = p.recv(n, b, timeout_ms)?;
        // SAFETY: as the caller promises for `len`.
        unsafe { received(r, len) }
    })
}

/// Stops the pipeline's sources; it finishes in order.
///
/// # Safety
/// `pipeline` is a live pipeline.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_stop(
    pipeline: *const offhost_pipeline,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(pipeline, "pipeline") }?.inner.stop()?;
        Ok(offhost_status::Ok)
    })
}

/// The pipeline's status as JSON (`{"state", "stats", "error"}`), for `offhost_string_free`.
///
/// # Safety
/// `pipeline` is a live pipeline; `json` storage for the string.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_status(
    pipeline: *const offhost_pipeline,
    json: *mut *mut c_char,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let v = unsafe { handle(pipeline, "pipeline") }?.inner.status()?;
        // SAFETY: as the caller promises for `json`.
        unsafe { put_string(json, v.to_string()) }
    })
}

/// Waits at most `timeout_ms` for the pipeline to finish and stores its statistics as JSON
/// (for `offhost_string_free`); `TASK_FAILED` if a task failed. Host channels never used are
/// closed first (inputs end their stream, outputs are discarded).
///
/// # Safety
/// `pipeline` is a live pipeline; `stats_json` NULL or storage for the string.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_wait(
    pipeline: *const offhost_pipeline,
    timeout_ms: i64,
    stats_json: *mut *mut c_char,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let stats = unsafe { handle(pipeline, "pipeline") }?.wait(timeout_ms)?;
        if stats_json.is_null() {
            return Ok(offhost_status::Ok);
        }
        // SAFETY: as the caller promises for `stats_json`.
        unsafe { put_string(stats_json, stats) }
    })
}

/// Frees a pipeline handle (an embedded pipeline still running is stopped).
///
/// # Safety
/// `pipeline` is NULL or a pipeline not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_pipeline_free(pipeline: *mut offhost_pipeline) {
    // SAFETY: as the caller promises.
    unsafe { free(pipeline) }
}

/// Runs pipeline `text` on the embedded engine to its end (host channels closed or
/// discarded) and stores its statistics as JSON (NULL: not wanted).
///
/// # Safety
/// `text` is a NUL-terminated string; `stats_json` NULL or storage for the string.
#[no_mangle]
pub unsafe extern "C" fn offhost_run(
    text: *const c_char,
    stats_json: *mut *mut c_char,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let t = unsafe { self::text(text, "text") }?;
        let stats = api::run(t)?;
        if stats_json.is_null() {
            return Ok(offhost_status::Ok);
        }
        // SAFETY: as the caller promises for `stats_json`.
        unsafe { put_string(stats_json, stats) }
    })
}

/// Frees a string this library returned.
///
/// # Safety
/// `s` is NULL or a string from this library, not freed before.
#[no_mangle]
pub unsafe extern "C" fn offhost_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by CString::into_raw in `put_string`, freed once.
        drop(unsafe { CString::from_raw(s) });
    }
}
