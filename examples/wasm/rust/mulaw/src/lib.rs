//! ITU-T G.711 mu-law encoding of 16-bit little-endian samples, 2 bytes in, 1 out, as the
//! built-in `mulaw` does: the classic reference coder's segment search, tabulated for all
//! 65536 samples at start. A sample split across two buffers is joined.

use offhost_wasm_guest::{Error, Filter, Out, Ports};

const SEG_UEND: [i16; 8] = [0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF];

fn linear_to_ulaw(sample: i16) -> u8 {
    let mut v = sample >> 2;
    let mask: u8 = if v < 0 {
        v = -v;
        0x7F
    } else {
        0xFF
    };
    v = v.min(8159) + 33;
    match SEG_UEND.iter().position(|&e| v <= e) {
        None => 0x7F ^ mask,
        Some(seg) => (((seg as u8) << 4) | ((v >> (seg + 1)) as u8 & 0x0F)) ^ mask,
    }
}

struct MuLaw {
    table: Vec<u8>,
    /// The first byte of a sample whose second is in the next buffer.
    carry: Option<u8>,
}

impl Filter for MuLaw {
    fn start(_arg: &str, ports: Ports) -> Result<Self, Error> {
        if ports.inputs != 1 || ports.outputs != 1 {
            return Err(Error::new("mulaw takes one input and one output"));
        }
        let table = (0..=u16::MAX).map(|s| linear_to_ulaw(s as i16)).collect();
        Ok(MuLaw { table, carry: None })
    }

    fn buffer(&mut self, _input: usize, mut data: &[u8], out: &mut Out<'_>) -> Result<(), Error> {
        if let (Some(lo), Some(&hi)) = (self.carry, data.first()) {
            out.write(0, &[self.table[u16::from_le_bytes([lo, hi]) as usize]]);
            self.carry = None;
            data = &data[1..];
        }
        let whole = data.len() / 2;
        let t = &self.table[..];
        let w = out.window(0);
        if w.len() >= whole {
            // The common case: straight into the window.
            for (o, s) in w[..whole].iter_mut().zip(data.chunks_exact(2)) {
                *o = t[u16::from_le_bytes([s[0], s[1]]) as usize];
            }
            out.commit(0, whole);
        } else {
            for s in data.chunks_exact(2) {
                out.write(0, &[t[u16::from_le_bytes([s[0], s[1]]) as usize]]);
            }
        }
        if data.len() % 2 == 1 {
            self.carry = data.last().copied();
        }
        Ok(())
    }

    fn end(&mut self, _input: usize, _out: &mut Out<'_>) -> Result<(), Error> {
        match self.carry {
            None => Ok(()),
            Some(_) => Err(Error::new(
                "G.711 encoding: the stream ended with 1 bytes that are not a whole frame of 2 bytes",
            )),
        }
    }
}

offhost_wasm_guest::filter!(MuLaw);
