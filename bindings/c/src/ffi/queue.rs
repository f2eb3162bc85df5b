//! The exported `offhost_queue_*` functions: a host's off-host submission and completion
//! queues (see `crate::queue`). Pointers are checked and converted here, each `unsafe` block
//! with its reason, as in the rest of the FFI edge.

use std::ffi::c_char;

use super::{buffer, bytes, call, free, handle, put, put_handle, take, text};
use crate::queue::{offhost_completion, offhost_queue, offhost_send_loan, Popped};
use crate::status::{offhost_status, set_message};

/// Connects to the local engine at `engine` (`shm:PATH` or `shm:@name`; `offhost engine
/// --listen shm:PATH`), which carries this host's channels to other engines.
///
/// # Safety
/// `engine` is a NUL-terminated string; `out` points to storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_connect(
    engine: *const c_char,
    out: *mut *mut offhost_queue,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `engine`.
        let engine = unsafe { text(engine, "engine") }?;
        let q = offhost_queue::connect(engine)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, q) }
    })
}

/// Opens `address` (`PEER/CHANNEL` at a peer of the engine, or `CHANNEL` at the engine) and
/// waits for the answer; stores the channel handle. `urgent` (non-zero) channels never queue
/// behind bulk ones; `rate` above 0 holds the channel to that many bytes a second, with
/// bursts of `burst`.
///
/// # Safety
/// `queue` is a live queue; `address` a NUL-terminated string; `channel` storage for a
/// `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_open(
    queue: *const offhost_queue,
    address: *const c_char,
    urgent: i32,
    rate: u64,
    burst: u64,
    channel: *mut u32,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `queue` and `address`.
        let (q, address) = unsafe { (handle(queue, "queue")?, text(address, "address")?) };
        let ch = q.open(address, urgent != 0, rate, burst)?;
        // SAFETY: as the caller promises for `channel`.
        unsafe { put(channel, ch) }?;
        Ok(offhost_status::Ok)
    })
}

/// Stages a send of a copy of `len` bytes at `data` on `channel`, with `tag`. `WOULD_BLOCK`
/// when a budget is spent: pop completions first.
///
/// # Safety
/// `queue` is a live queue; `data` points to `len` readable bytes (or is NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_push_send(
    queue: *const offhost_queue,
    channel: u32,
    data: *const u8,
    len: usize,
    tag: u64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `queue`, `data` and `len`.
        let (q, data) = unsafe { (handle(queue, "queue")?, bytes(data, len)?) };
        q.push_send(channel, data, tag)?;
        Ok(offhost_status::Ok)
    })
}

/// A loan of `len` bytes to write a message into (off-host a buffer of the shared pool),
/// waiting at most `timeout_ms` (negative: for ever) for a free one.
///
/// # Safety
/// `queue` is a live queue; `out` storage for the handle.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_loan(
    queue: *const offhost_queue,
    len: usize,
    timeout_ms: i64,
    out: *mut *mut offhost_send_loan,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let l = unsafe { handle(queue, "queue") }?.loan(len, timeout_ms)?;
        // SAFETY: as the caller promises for `out`.
        unsafe { put_handle(out, l) }
    })
}

/// The loan's bytes (`offhost_send_loan_len` of them), writable until it is pushed or
/// freed.
///
/// # Safety
/// `loan` is a live loan.
#[no_mangle]
pub unsafe extern "C" fn offhost_send_loan_data(loan: *mut offhost_send_loan) -> *mut u8 {
    // SAFETY: as the caller promises.
    match unsafe { loan.as_mut() } {
        Some(l) => l.data(),
        None => std::ptr::null_mut(),
    }
}

/// The loan's length in bytes.
///
/// # Safety
/// `loan` is a live loan.
#[no_mangle]
pub unsafe extern "C" fn offhost_send_loan_len(loan: *const offhost_send_loan) -> usize {
    // SAFETY: as the caller promises.
    unsafe { loan.as_ref() }.map_or(0, |l| l.len())
}

/// Stages a send of the loan's message on `channel`, without copying it. The loan is
/// consumed (freed) whatever the outcome.
///
/// # Safety
/// `queue` is a live queue; `loan` a live loan, not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_push_send_loan(
    queue: *const offhost_queue,
    channel: u32,
    loan: *mut offhost_send_loan,
    tag: u64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises: a live loan, consumed here.
        let loan = unsafe { take(loan, "loan") }?;
        // SAFETY: as the caller promises.
        unsafe { handle(queue, "queue") }?.push_send_loan(channel, loan, tag)?;
        Ok(offhost_status::Ok)
    })
}

/// Returns an unpushed loan to the pool.
///
/// # Safety
/// `loan` is NULL or a loan not pushed, not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_send_loan_free(loan: *mut offhost_send_loan) {
    // SAFETY: as the caller promises.
    unsafe { free(loan) }
}

/// Stages a receive on `channel` of a message of at most `max` bytes (0: any), with `tag`.
///
/// # Safety
/// `queue` is a live queue.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_push_recv(
    queue: *const offhost_queue,
    channel: u32,
    max: u32,
    tag: u64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(queue, "queue") }?.push_recv(channel, max, tag)?;
        Ok(offhost_status::Ok)
    })
}

/// Stages closing `channel` (its pending receives complete with `END`), with `tag`.
///
/// # Safety
/// `queue` is a live queue.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_push_close(
    queue: *const offhost_queue,
    channel: u32,
    tag: u64,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(queue, "queue") }?.push_close(channel, tag)?;
        Ok(offhost_status::Ok)
    })
}

/// Publishes what was staged to the engine (one doorbell at most).
///
/// # Safety
/// `queue` is a live queue.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_submit(queue: *const offhost_queue) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        unsafe { handle(queue, "queue") }?.submit()?;
        Ok(offhost_status::Ok)
    })
}

/// Waits until `min` completions are ready or `timeout_ms` passes (negative: no limit), and
/// stores how many are ready (fewer than `min` when the time ran out).
///
/// # Safety
/// `queue` is a live queue; `ready` NULL or storage for a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_wait(
    queue: *const offhost_queue,
    min: usize,
    timeout_ms: i64,
    ready: *mut usize,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises.
        let n = unsafe { handle(queue, "queue") }?.wait(min, timeout_ms)?;
        if !ready.is_null() {
            // SAFETY: non-null, and storage for a size_t as the caller promises.
            unsafe { put(ready, n) }?;
        }
        Ok(offhost_status::Ok)
    })
}

/// Takes the next ready completion into `out`; a receive's message is copied to `buf` (at
/// most `cap` bytes) and its length stored in `len`. `END` when none is ready; `TOO_LARGE`
/// when the message does not fit (`len` says how much it needs, and the completion stays
/// first). A failed submission is `OK` here with the failure in `out->status` and its reason
/// in `offhost_last_error()`.
///
/// # Safety
/// `queue` is a live queue; `out` storage for a completion; `buf` `cap` writable bytes (or
/// NULL with `cap` 0); `len` storage for a `size_t`.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_pop(
    queue: *const offhost_queue,
    out: *mut offhost_completion,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> offhost_status {
    call(|| {
        // SAFETY: as the caller promises for `queue`, `buf` and `cap`.
        let (q, buf) = unsafe { (handle(queue, "queue")?, buffer(buf, cap)?) };
        match q.pop(buf) {
            Popped::Empty => Ok(offhost_status::End),
            Popped::TooSmall(n) => {
                // SAFETY: as the caller promises for `len`.
                unsafe { put(len, n) }?;
                set_message(&format!(
                    "a message of {n} bytes does not fit the buffer of {cap} (it stays first)"
                ));
                Ok(offhost_status::TooLarge)
            }
            Popped::Got(c, n) => {
                // SAFETY: as the caller promises for `out` and `len`.
                unsafe { put(out, c) }?;
                // SAFETY: as the caller promises for `len`.
                unsafe { put(len, n) }?;
                Ok(offhost_status::Ok)
            }
        }
    })
}

/// Frees a queue: the engine fails what it had not completed.
///
/// # Safety
/// `queue` is NULL or a queue not freed before and not used after.
#[no_mangle]
pub unsafe extern "C" fn offhost_queue_free(queue: *mut offhost_queue) {
    // SAFETY: as the caller promises.
    unsafe { free(queue) }
}
