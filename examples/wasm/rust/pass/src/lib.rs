//! A pass-through filter: each buffer goes out as it came in (the built-in `count`'s bytes).

use offhost_wasm_guest::{Error, Out};

fn pass(data: &[u8], out: &mut Out<'_>) -> Result<(), Error> {
    out.write(0, data);
    Ok(())
}

offhost_wasm_guest::filter_fn!(pass);
