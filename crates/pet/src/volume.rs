//! Image volumes and their PNG rendering (slices and a maximum-intensity projection).

use std::path::Path;

use crate::error::ImageError;

/// A stack of transaxial slices.
#[derive(Clone, Debug, PartialEq)]
pub struct Volume {
    /// Pixels per row and per column of a slice.
    pub n: usize,
    /// Number of slices.
    pub slices: usize,
    /// Pixel size in mm.
    pub pixel_mm: f64,
    /// Slice spacing in mm.
    pub slice_mm: f64,
    /// Values, `[slice][row][col]`.
    pub data: Vec<f32>,
}

impl Volume {
    /// One slice.
    pub fn slice(&self, k: usize) -> &[f32] {
        &self.data[k * self.n * self.n..(k + 1) * self.n * self.n]
    }

    /// Coronal maximum-intensity projection: `slices x n`, the maximum over rows.
    pub fn mip_coronal(&self) -> Vec<f32> {
        let n = self.n;
        let mut out = vec![f32::MIN; self.slices * n];
        for k in 0..self.slices {
            let s = self.slice(k);
            for row in 0..n {
                for col in 0..n {
                    let o = &mut out[k * n + col];
                    *o = o.max(s[row * n + col]);
                }
            }
        }
        out
    }

    /// Renders the slices in a grid of `columns` and, below them, the coronal
    /// maximum-intensity projection stretched to the true slice spacing; grey levels from 0 to
    /// the volume's maximum.
    pub fn render(&self, columns: usize) -> Result<(usize, usize, Vec<u8>), ImageError> {
        let n = self.n;
        if n == 0 || self.slices == 0 {
            return Err(ImageError::Empty);
        }
        let cols = columns.clamp(1, self.slices);
        let rows = self.slices.div_ceil(cols);
        let stretch = (self.slice_mm / self.pixel_mm).max(1.0);
        let mip_h = (self.slices as f64 * stretch).round() as usize;
        let width = cols * n;
        let height = rows * n + 4 + mip_h;
        // Grey levels up to the 99.9th percentile of the positive values, so a few noisy
        // voxels (edge slices, where few ring pairs contribute) do not darken the rest.
        let mut pos: Vec<f32> = self.data.iter().copied().filter(|v| *v > 0.0).collect();
        let max = if pos.is_empty() {
            1.0
        } else {
            let k = ((pos.len() - 1) as f64 * 0.999) as usize;
            *pos.select_nth_unstable_by(k, f32::total_cmp).1
        }
        .max(1e-12);
        let grey = |v: f32| ((v.max(0.0) / max).min(1.0) * 255.0).round() as u8;
        let mut px = vec![0u8; width * height];
        for k in 0..self.slices {
            let (gy, gx) = (k / cols, k % cols);
            let s = self.slice(k);
            for row in 0..n {
                for col in 0..n {
                    px[(gy * n + row) * width + gx * n + col] = grey(s[row * n + col]);
                }
            }
        }
        let mip = self.mip_coronal();
        let top = rows * n + 4;
        for y in 0..mip_h {
            let k = ((y as f64 / stretch) as usize).min(self.slices - 1);
            for col in 0..n.min(width) {
                px[(top + y) * width + col] = grey(mip[k * n + col]);
            }
        }
        Ok((width, height, px))
    }

    /// Writes [`render`](Self::render) as an 8-bit greyscale PNG.
    pub fn write_png(&self, path: &Path, columns: usize) -> Result<(), ImageError> {
        self.write_png_to(std::fs::File::create(path)?, columns)
    }

    /// Writes [`render`](Self::render) as an 8-bit greyscale PNG to an open file or a buffer.
    pub fn write_png_to(
        &self,
        file: impl std::io::Write,
        columns: usize,
    ) -> Result<(), ImageError> {
        self.write_png_tagged(file, columns, &[])
    }

    /// [`write_png_to`](Self::write_png_to) with `text`, `(keyword, value)` pairs, in `tEXt`
    /// chunks.
    pub fn write_png_tagged(
        &self,
        file: impl std::io::Write,
        columns: usize,
        text: &[(&str, String)],
    ) -> Result<(), ImageError> {
        let (w, h, px) = self.render(columns)?;
        let f = std::io::BufWriter::new(file);
        let mut enc = png::Encoder::new(f, w as u32, h as u32);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        for (k, v) in text {
            enc.add_text_chunk(k.to_string(), v.clone())?;
        }
        let mut wr = enc.write_header()?;
        wr.write_image_data(&px)?;
        wr.finish()?;
        Ok(())
    }
}
