//! The images a live scan hands to the host: each PNG timed as it arrives, the newest kept.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use offhost_node::calls::wire::Joiner;

/// The largest image the host joins from parts (a full mMR volume's PNG is about 10 MB).
pub const MAX_IMAGE_BYTES: usize = 64 << 20;

/// What came of the images so far.
#[derive(Debug, Default)]
pub struct Images {
    /// When each whole image arrived, and the net counts of the sinogram it was made from
    /// (its PNG's [`offhost_pet::tasks::NET_COUNTS_KEY`] text).
    pub arrived: Vec<(Instant, Option<i64>)>,
    /// The newest image's PNG bytes.
    pub newest: Vec<u8>,
}

/// A host-out channel's writer that cuts its messages into images: whole buffers one per
/// write (a pipeline in this process), or parts after a flag byte (`host-out whole=true` of
/// a daemon), joined by the link's [`Joiner`] up to [`MAX_IMAGE_BYTES`].
#[derive(Debug)]
pub struct ImageSink {
    framed: bool,
    parts: Joiner,
    images: Arc<Mutex<Images>>,
}

/// A joiner for the next image.
fn joiner() -> Joiner {
    Joiner::new(
        MAX_IMAGE_BYTES,
        "an image",
        "MAX_IMAGE_BYTES, the host's bound on one image,",
    )
}

impl ImageSink {
    /// A sink filling `images`; `framed` for a daemon's channel.
    pub fn new(framed: bool, images: Arc<Mutex<Images>>) -> ImageSink {
        ImageSink {
            framed,
            parts: joiner(),
            images,
        }
    }

    fn whole(&mut self, png: Vec<u8>) {
        let at = Instant::now();
        let net = net_counts(&png);
        let mut i = self.images.lock().unwrap_or_else(|e| e.into_inner());
        i.arrived.push((at, net));
        i.newest = png;
    }
}

/// The net counts an image's PNG gives in its text, if it is a PNG and gives them.
pub fn net_counts(png: &[u8]) -> Option<i64> {
    let r = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .ok()?;
    let text = &r.info().uncompressed_latin1_text;
    let t = text
        .iter()
        .find(|t| t.keyword == offhost_pet::tasks::NET_COUNTS_KEY)?;
    t.text.parse().ok()
}

impl Write for ImageSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.framed {
            self.whole(buf.to_vec());
            return Ok(buf.len());
        }
        match self.parts.push(buf) {
            Ok(None) => {}
            Ok(Some(png)) => {
                self.parts = joiner();
                self.whole(png);
            }
            Err(e) => {
                self.parts = joiner();
                return Err(std::io::Error::other(format!("images channel: {e}")));
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_parts_make_one_image_and_a_bad_flag_is_an_error() {
        let images = Arc::new(Mutex::new(Images::default()));
        let mut s = ImageSink::new(true, Arc::clone(&images));
        s.write_all(&[1, b'a', b'b']).unwrap();
        s.write_all(&[0, b'c']).unwrap();
        s.write_all(&[0, b'd']).unwrap();
        {
            let i = images.lock().unwrap();
            assert_eq!(i.arrived.len(), 2);
            assert_eq!(i.newest, b"d");
        }
        assert!(s.write_all(&[7, 1]).is_err());
        // Parts past the bound end the channel instead of growing without end.
        let big = vec![1u8; 1 << 20];
        let over = (0..=64).find_map(|_| s.write_all(&big).err());
        assert!(over.unwrap().to_string().contains("MAX_IMAGE_BYTES"));
        let mut w = ImageSink::new(false, Arc::clone(&images));
        w.write_all(b"png").unwrap();
        assert_eq!(images.lock().unwrap().newest, b"png");
    }
}
