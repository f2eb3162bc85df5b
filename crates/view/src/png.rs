//! A shown picture as PNG, encoded on the view's thread (never on a task's).

use offhost_engine::Picture;

/// `p` as a grey 8-bit PNG.
pub(crate) fn encode(p: &Picture) -> Result<Vec<u8>, String> {
    let (w, h) = (u32::try_from(p.width), u32::try_from(p.height));
    let (Ok(w), Ok(h)) = (w, h) else {
        return Err(format!(
            "a picture of {} x {} is too large",
            p.width, p.height
        ));
    };
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()
        .and_then(|mut wr| wr.write_image_data(&p.pixels))
        .map_err(|e| format!("PNG: {e}"))?;
    Ok(out)
}
