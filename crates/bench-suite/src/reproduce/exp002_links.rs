//! `[DS-link]` Part 1 rerun: virtual links multiplexed on one physical link (Figure 1) and the
//! short-message rate over many virtual links (Figure 5), with `bench mux`'s measurements
//! over the run's channel transport.

use std::fmt::Write as _;
use std::path::Path;

use indicatif::ProgressBar;
use offhost_bench::transport::Transport;

use super::md::{ratio, Finding, Table};
use super::seeds;
use super::verdict::{all_of, Measured};
use crate::error::Result;
use crate::mux::{self, Layout};

/// Points this experiment adds to the progress bar.
pub const POINTS: usize = 1;

/// Runs `bench mux` with the run's transport, shorter when `quick`.
pub fn measure(transport: Transport, quick: bool, bar: &ProgressBar) -> Result<mux::Report> {
    let o = mux::Options {
        transport,
        channels: if quick {
            vec![1, 3, 5]
        } else {
            vec![1, 2, 3, 4, 5]
        },
        sizes: if quick {
            vec![64, 1024, 65536]
        } else {
            vec![64, 256, 1024, 4096, 16384, 65536]
        },
        bytes: if quick { 8 << 20 } else { 64 << 20 },
        max_seconds: if quick { 0.3 } else { 0.5 },
        links: if quick {
            vec![1, 2, 4]
        } else {
            vec![1, 2, 3, 4]
        },
        per_link: 10,
        rate_sizes: if quick { vec![0, 32] } else { vec![0, 8, 32] },
        messages: if quick { 200_000 } else { 2_000_000 },
        rounds: if quick { 1 } else { 2 },
    };
    let r = mux::run(&o, &ProgressBar::hidden())?;
    bar.inc(1);
    Ok(r)
}

/// The report section (with the two plots) and the findings checked.
pub fn section(r: &mux::Report, out: &Path) -> Result<(String, Vec<Finding>)> {
    let files = mux::plot(r, out)?;
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| {
            f.file_name()
                .map(|n| format!("![{0}]({0})", n.to_string_lossy()))
        })
        .collect();
    let mut md = String::new();
    let (seed_one, seed_limit) = seeds::F1_002;
    let (seed_rate, seed_cpu) = seeds::F5_002;
    let _ = writeln!(
        md,
        "## [DS-link] Part 1, Figures 1 and 5: virtual links on one physical link\n\n\
         The seed's T9000s carried one to five virtual links on one DS link (Figure 1: one \
         virtual link {seed_one} MB/s between directly joined T9000s, {seed_limit} MB/s the \
         link's measured limit with more virtual links, because a single virtual link waits for \
         each 32-byte packet's acknowledgement) and sent short messages over ten virtual links \
         per physical link (Figure 5: {seed_rate} messages/s at most, {seed_cpu} us of CPU each). \
         Here: N channels of one session against N sessions of one channel, over `{}`, one \
         sender thread per channel (`offhost bench mux`).\n",
        r.transport,
    );
    let sizes = distinct(r.multiplexed.iter().map(|x| x.size));
    let mut head = vec!["layout".to_string(), "N".into()];
    head.extend(sizes.iter().map(|z| format!("{z} B, MB/s")));
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head);
    for layout in [Layout::OneLink, Layout::LinkPerChannel] {
        for n in distinct(r.multiplexed.iter().map(|x| x.channels)) {
            let mut cells = vec![layout.name().to_string(), n.to_string()];
            for &z in &sizes {
                cells.push(
                    r.multiplexed
                        .iter()
                        .find(|x| x.layout == layout && x.channels == n && x.size == z)
                        .map_or("-".into(), |x| format!("{:.1}", x.mb_per_s)),
                );
            }
            t.row(cells);
        }
    }
    let _ = writeln!(md, "{}", t.render());
    let mut t = Table::new(&[
        "links",
        "channels",
        "message B",
        "messages/s",
        "sender CPU us/message",
    ]);
    for x in &r.short_rate {
        t.row(vec![
            x.links.to_string(),
            (x.links * x.per_link).to_string(),
            x.size.to_string(),
            format!("{:.0}", x.msgs_per_s),
            format!("{:.2}", x.sender_cpu_us_per_msg),
        ]);
    }
    let _ = writeln!(md, "{}\n{}\n", t.render(), names.join("\n\n"));
    let mut f = Vec::new();
    if let (Some(n), Some(g)) = (r.gain_channels, r.one_link_gain) {
        f.push(Finding {
            source: "[DS-link] Part 1, Figure 1",
            claim: "more virtual links on one physical link raise its bandwidth (while one waits for credit, another sends)".into(),
            seed: format!("{seed_one} MB/s on one virtual link, up to {seed_limit} MB/s with more"),
            here: format!(
                "one link with {n} channels / with 1, largest message: {}x{}",
                ratio(g),
                r.one_link_vs_links
                    .map_or(String::new(), |v| format!("; one link / {n} links: {}x", ratio(v)))
            ),
            holds: Measured::point(g).at_least(1.05),
        });
    }
    if let Some(best) = r
        .short_rate
        .iter()
        .max_by(|a, b| a.msgs_per_s.total_cmp(&b.msgs_per_s))
    {
        f.push(Finding {
            source: "[DS-link] Part 1, Figure 5",
            claim: "a short message costs its sender a couple of microseconds of CPU, so hundreds of thousands go out each second".into(),
            seed: format!("{seed_rate} messages/s, {seed_cpu} us of CPU each"),
            here: format!(
                "{:.0} messages/s at best ({} links, {} B), {:.2} us of sender CPU each",
                best.msgs_per_s, best.links, best.size, best.sender_cpu_us_per_msg
            ),
            holds: all_of(&[
                Measured::point(best.msgs_per_s).at_least(seed_rate as f64),
                Measured::point(best.sender_cpu_us_per_msg).below(seed_cpu),
            ]),
        });
    }
    Ok((md, f))
}

fn distinct(it: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}
