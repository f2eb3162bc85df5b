//! The pipeline of a live scan, as text: one share per engine (its host channel and its
//! histogram), and on the first engine the merge, the images and their way to the host.

use std::fmt::Write as _;
use std::time::Duration;

use offhost_pet::{files, sinofile, Scanner};

use crate::LiveError;

/// What the pipeline is made of.
#[derive(Clone, Debug)]
pub struct Shape<'a> {
    /// The engine of each share (`@NAME`); one name for every share in this process.
    pub engines: Vec<&'a str>,
    /// The scanner preset the engines know the recording's geometry by.
    pub scanner: &'a str,
    /// Axial compression: 1, an odd span, or `ssrb`.
    pub span: &'a str,
    /// Snapshots, merges and live images about this far apart.
    pub period: Duration,
    /// Where the engine running the merge writes the final merged sinogram.
    pub sinogram: Option<&'a str>,
    /// Where it writes the final image.
    pub png: &'a str,
    /// Where it writes each live image.
    pub live: Option<&'a str>,
    /// The final image at the live images' level instead of a full reconstruction.
    pub final_live: bool,
}

/// Host-in channel of share `k`.
pub fn events_channel(k: usize) -> String {
    format!("events{k}")
}

/// Host-out channel of the images.
pub const IMAGES: &str = "images";

/// The pipeline text. The sinograms each share sends to the merge go into a free list of
/// two buffers of an encoded sinogram's size (rounded up to a MiB), which bounds the
/// snapshots in flight and is the receiving list when the merge runs on another engine.
pub fn pipeline(s: &Shape<'_>) -> Result<String, LiveError> {
    let plan = |e: String| LiveError::Plan(e);
    let scanner =
        Scanner::preset(s.scanner).map_err(|e| plan(format!("scanner {}: {e}", s.scanner)))?;
    let span = files::span_of(&scanner, s.span).map_err(|e| plan(e.to_string()))?;
    let size = sinofile::encoded_len(&scanner.with_span(span)).map_err(|e| plan(e.to_string()))?;
    let mib = size.div_ceil(1 << 20);
    let period = s.period.as_secs_f64();
    let first = s.engines[0];
    let mut t =
        String::from("# offhost pet replay: shares of a recorded scan, merged and imaged live\n");
    for (k, e) in s.engines.iter().enumerate() {
        let _ = writeln!(
            t,
            "host-in name={} @{e} >w{k}:words{k}(16,64k)",
            events_channel(k)
        );
        let _ = writeln!(
            t,
            "sinogram scanner={} format=petlink span={} period={period} @{e} <w{k} >s{k}",
            s.scanner, s.span
        );
    }
    let inputs: String = (0..s.engines.len())
        .map(|k| format!(" <s{k}:sino{k}(2,{mib}M)"))
        .collect();
    let out = s.sinogram.map(|o| format!(" out={o}")).unwrap_or_default();
    let _ = writeln!(t, "sino-sum period={period}{out} @{first}{inputs} >merged");
    let live = s.live.map(|l| format!(" live={l}")).unwrap_or_default();
    let _ = writeln!(
        t,
        "recon method=fbp-hann png={} period={period}{live} final={} @{first} <merged >pictures",
        s.png,
        if s.final_live { "live" } else { "full" }
    );
    let _ = writeln!(t, "host-out name={IMAGES} whole=true @{first} <pictures");
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_shares_merge_on_the_first_engine() {
        let t = pipeline(&Shape {
            engines: vec!["a", "b"],
            scanner: "mmr",
            span: "ssrb",
            period: Duration::from_millis(1500),
            sinogram: Some("m.hs"),
            png: "final.png",
            live: None,
            final_live: false,
        })
        .unwrap();
        // mMR SSRB: 127 x 252 x 344 counts of 4 bytes and a header: 42 MiB (44,037,568 bytes).
        assert!(
            t.contains("sino-sum period=1.5 out=m.hs @a <s0:sino0(2,42M) <s1:sino1(2,42M) >merged"),
            "{t}"
        );
        assert!(
            t.contains("host-in name=events1 @b >w1:words1(16,64k)"),
            "{t}"
        );
        assert!(
            t.contains("sinogram scanner=mmr format=petlink span=ssrb period=1.5 @b <w1 >s1"),
            "{t}"
        );
        let bad = pipeline(&Shape {
            span: "4",
            ..Shape {
                engines: vec!["a"],
                scanner: "mmr",
                span: "1",
                period: Duration::from_secs(1),
                sinogram: None,
                png: "x.png",
                live: None,
                final_live: true,
            }
        });
        assert!(bad.unwrap_err().to_string().contains("span"));
    }
}
