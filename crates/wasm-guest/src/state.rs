//! The module's state behind the interface's exports: its areas, its windows and the filter.

use alloc::vec;
use alloc::vec::Vec;

use crate::out::Out;
use crate::{Error, Filter, Ports};

/// The interface's codes.
const DONE: i32 = 0;
const MORE: i32 = 1;
const FAILED: i32 = -1;

/// Kinds of area the engine asks for.
const AREA_ARGS: i32 = 0;
const AREA_INPUT: i32 = 1;
const AREA_OUTPUT: i32 = 2;

/// Most ports an area may be asked for.
const MAX_PORTS: usize = 1024;

/// The engine's side of a call: its imports (in a module, `offhost.emit` and `offhost.error`).
pub trait Host {
    /// The first `len` bytes of output `output`'s window are a buffer.
    fn emit(&mut self, output: usize, len: usize);
    /// The message of the error the call returns.
    fn error(&mut self, message: &str);
}

/// Everything a module keeps between calls.
pub struct State<F> {
    filter: Option<F>,
    args: Vec<u8>,
    inputs: Vec<Vec<u8>>,
    windows: Vec<Vec<u8>>,
    filled: Vec<usize>,
    /// Per output, what waits for the next window.
    spill: Vec<Vec<u8>>,
}

impl<F> Default for State<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F> State<F> {
    /// Empty: no areas, no filter.
    pub const fn new() -> State<F> {
        State {
            filter: None,
            args: Vec::new(),
            inputs: Vec::new(),
            windows: Vec::new(),
            filled: Vec::new(),
            spill: Vec::new(),
        }
    }

    /// `offhost_area`: the address of `size` bytes kept for `kind` and `index` (the same
    /// memory again when it is large enough), or 0.
    pub fn area(&mut self, kind: i32, index: i32, size: i32) -> usize {
        let (Ok(i), Ok(size)) = (usize::try_from(index), usize::try_from(size)) else {
            return 0;
        };
        if i >= MAX_PORTS {
            return 0;
        }
        let v = match kind {
            AREA_ARGS => &mut self.args,
            AREA_INPUT => slot(&mut self.inputs, i),
            AREA_OUTPUT => {
                let v = slot(&mut self.windows, i);
                if self.filled.len() <= i {
                    self.filled.resize(i + 1, 0);
                    self.spill.resize(i + 1, Vec::new());
                }
                // A window is exactly the engine's buffer size: `Out` fills up to its length.
                v.clear();
                v.resize(size, 0);
                return v.as_mut_ptr() as usize;
            }
            _ => return 0,
        };
        if v.len() < size {
            *v = vec![0; size];
        }
        v.as_mut_ptr() as usize
    }

    /// After a call: emits what each window holds and says whether output waits.
    fn finish(&mut self, host: &mut impl Host) -> i32 {
        for (o, n) in self.filled.iter_mut().enumerate() {
            if *n > 0 {
                host.emit(o, *n);
                *n = 0;
            }
        }
        if self.spill.iter().any(|s| !s.is_empty()) {
            MORE
        } else {
            DONE
        }
    }

    fn out(&mut self) -> Out<'_> {
        Out {
            windows: &mut self.windows,
            filled: &mut self.filled,
            spill: &mut self.spill,
        }
    }

    fn failed(host: &mut impl Host, e: Error) -> i32 {
        host.error(e.message());
        FAILED
    }

    /// `offhost_resume`: moves waiting output into the empty windows.
    pub fn resume(&mut self, host: &mut impl Host) -> i32 {
        for o in 0..self.spill.len() {
            let waiting = core::mem::take(&mut self.spill[o]);
            let n = waiting.len().min(self.windows[o].len());
            self.windows[o][..n].copy_from_slice(&waiting[..n]);
            self.filled[o] = n;
            self.spill[o] = waiting[n..].to_vec();
        }
        self.finish(host)
    }
}

fn slot(v: &mut Vec<Vec<u8>>, i: usize) -> &mut Vec<u8> {
    if v.len() <= i {
        v.resize(i + 1, Vec::new());
    }
    &mut v[i]
}

impl<F: Filter> State<F> {
    /// `offhost_start`: the filter from the arguments' area.
    pub fn start(&mut self, len: i32, inputs: i32, outputs: i32, host: &mut impl Host) -> i32 {
        let args = self.args.get(..len.max(0) as usize).unwrap_or_default();
        let Ok(arg) = core::str::from_utf8(args) else {
            return Self::failed(host, Error::new("arg= is not UTF-8"));
        };
        let ports = Ports {
            inputs: inputs.max(0) as usize,
            outputs: outputs.max(0) as usize,
        };
        if ports.outputs > MAX_PORTS {
            return Self::failed(host, Error::new("too many outputs"));
        }
        self.filled.resize(ports.outputs.max(self.filled.len()), 0);
        self.spill
            .resize(ports.outputs.max(self.spill.len()), Vec::new());
        self.windows
            .resize(ports.outputs.max(self.windows.len()), Vec::new());
        match F::start(arg, ports) {
            Ok(f) => {
                self.filter = Some(f);
                DONE
            }
            Err(e) => Self::failed(host, e),
        }
    }

    /// `offhost_buffer`: `len` bytes of input `input`'s area to the filter.
    pub fn buffer(&mut self, input: i32, len: i32, host: &mut impl Host) -> i32 {
        let i = input.max(0) as usize;
        let Some(f) = self.filter.as_mut() else {
            return Self::failed(host, Error::new("a buffer before start"));
        };
        let Some(data) = self
            .inputs
            .get(i)
            .and_then(|a| a.get(..len.max(0) as usize))
        else {
            return Self::failed(host, Error::new("a buffer larger than its area"));
        };
        let mut out = Out {
            windows: &mut self.windows,
            filled: &mut self.filled,
            spill: &mut self.spill,
        };
        match f.buffer(i, data, &mut out) {
            Ok(()) => self.finish(host),
            Err(e) => Self::failed(host, e),
        }
    }

    /// `offhost_end`: input `input` ended.
    pub fn end(&mut self, input: i32, host: &mut impl Host) -> i32 {
        let Some(mut f) = self.filter.take() else {
            return Self::failed(host, Error::new("an end before start"));
        };
        let r = f.end(input.max(0) as usize, &mut self.out());
        self.filter = Some(f);
        match r {
            Ok(()) => self.finish(host),
            Err(e) => Self::failed(host, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    /// Records the engine's side: what was emitted (copied out of the window, as the engine
    /// does) and the last error.
    #[derive(Default)]
    struct Engine {
        out: Vec<(usize, usize)>,
        error: Option<String>,
    }

    impl Host for Engine {
        fn emit(&mut self, output: usize, len: usize) {
            self.out.push((output, len));
        }
        fn error(&mut self, message: &str) {
            self.error = Some(message.into());
        }
    }

    /// Doubles every byte: twice its input, so it outgrows its windows.
    struct Twice;
    impl Filter for Twice {
        fn start(arg: &str, _: Ports) -> Result<Self, Error> {
            if arg == "refuse" {
                return Err(Error::new("refused as asked"));
            }
            Ok(Twice)
        }
        fn buffer(&mut self, _: usize, data: &[u8], out: &mut Out<'_>) -> Result<(), Error> {
            for b in data {
                out.write(0, &[*b, *b]);
            }
            Ok(())
        }
        fn end(&mut self, _: usize, out: &mut Out<'_>) -> Result<(), Error> {
            out.write(0, b"end");
            Ok(())
        }
    }

    /// Runs the state as the engine would, collecting the bytes each emit hands over.
    fn drive(s: &mut State<Twice>, e: &mut Engine, input: Option<&[u8]>, got: &mut Vec<u8>) {
        let mut code = match input {
            Some(input) => {
                let a = s.area(AREA_INPUT, 0, input.len() as i32);
                assert_ne!(a, 0);
                s.inputs[0][..input.len()].copy_from_slice(input);
                s.buffer(0, input.len() as i32, e)
            }
            None => s.end(0, e),
        };
        loop {
            for (o, n) in e.out.drain(..) {
                got.extend_from_slice(&s.windows[o][..n]);
            }
            if code != MORE {
                break;
            }
            code = s.resume(e);
        }
        assert_eq!(code, DONE);
    }

    #[test]
    fn output_larger_than_a_window_goes_out_in_the_next_ones() {
        let mut s = State::<Twice>::new();
        let mut e = Engine::default();
        assert_eq!(s.start(0, 1, 1, &mut e), DONE);
        assert_ne!(s.area(AREA_OUTPUT, 0, 4), 0);
        let mut got = Vec::new();
        drive(&mut s, &mut e, Some(b"abcde"), &mut got);
        assert_eq!(got, b"aabbccddee");
        drive(&mut s, &mut e, None, &mut got);
        assert_eq!(got, b"aabbccddeeend");
    }

    #[test]
    fn a_filters_error_reaches_the_engine_with_its_message() {
        let mut s = State::<Twice>::new();
        let mut e = Engine::default();
        let text = b"refuse";
        s.area(AREA_ARGS, 0, text.len() as i32);
        s.args[..text.len()].copy_from_slice(text);
        assert_eq!(s.start(text.len() as i32, 1, 1, &mut e), FAILED);
        assert_eq!(e.error.as_deref(), Some("refused as asked"));
        assert_eq!(s.buffer(0, 0, &mut e), FAILED);
        assert_eq!(e.error.as_deref(), Some("a buffer before start"));
    }

    #[test]
    fn a_bad_area_request_gets_no_room() {
        let mut s = State::<Twice>::new();
        assert_eq!(s.area(9, 0, 16), 0);
        assert_eq!(s.area(AREA_INPUT, -1, 16), 0);
        assert_eq!(s.area(AREA_INPUT, 0, -16), 0);
        assert_eq!(s.area(AREA_INPUT, MAX_PORTS as i32, 16), 0);
    }
}
