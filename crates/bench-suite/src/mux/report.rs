//! `bench mux`'s text tables and plots.

use offhost_bench::plot::{plot_xy, Series, Spec};

use super::*;

impl Report {
    /// The figures as tables.
    pub fn text(&self) -> String {
        let mut s = String::new();
        if !self.multiplexed.is_empty() {
            s += &format!(
                "N channels on one link against a link per channel ([DS-link] Figure 1), {}, one-way MB/s, best of {}:\n",
                self.transport, self.rounds
            );
            let sizes = distinct(self.multiplexed.iter().map(|r| r.size));
            s += &format!("{:<18}{:>4}", "layout", "N");
            for &z in &sizes {
                s += &format!("{:>10}", format_size(z));
            }
            s.push('\n');
            for layout in [Layout::OneLink, Layout::LinkPerChannel] {
                for n in distinct(self.multiplexed.iter().map(|r| r.channels)) {
                    s += &format!("{:<18}{n:>4}", layout.name());
                    for &z in &sizes {
                        match self
                            .multiplexed
                            .iter()
                            .find(|r| r.layout == layout && r.channels == n && r.size == z)
                        {
                            Some(r) => s += &format!("{:>10.1}", r.mb_per_s),
                            None => s += &format!("{:>10}", "-"),
                        }
                    }
                    s.push('\n');
                }
            }
            if let (Some(n), Some(g)) = (self.gain_channels, self.one_link_gain) {
                let z = sizes.last().copied().unwrap_or(0);
                s += &format!(
                    "at {}: one link with {n} channels / with 1: {g:.2}",
                    format_size(z)
                );
                if let Some(v) = self.one_link_vs_links {
                    s += &format!("; one link / {n} links: {v:.2}");
                }
                s.push('\n');
            }
        }
        if !self.short_rate.is_empty() {
            let per = self.short_rate[0].per_link;
            s += &format!(
                "short messages ([DS-link] Figure 5), {}, {per} channels per link, messages/s (sender CPU us per message), best of {}:\n",
                self.transport, self.rounds
            );
            let sizes = distinct(self.short_rate.iter().map(|r| r.size));
            s += &format!("{:<6}", "links");
            for &z in &sizes {
                s += &format!("{:>24}", format!("{z} B"));
            }
            s.push('\n');
            for l in distinct(self.short_rate.iter().map(|r| r.links)) {
                s += &format!("{l:<6}");
                for &z in &sizes {
                    match self.short_rate.iter().find(|r| r.links == l && r.size == z) {
                        Some(r) => {
                            let cell =
                                format!("{:.0} ({:.2})", r.msgs_per_s, r.sender_cpu_us_per_msg);
                            s += &format!("{cell:>24}");
                        }
                        None => s += &format!("{:>24}", "-"),
                    }
                }
                s.push('\n');
            }
            if let Some(p) = self.peak_msgs_per_s {
                s += &format!(
                    "peak: {p:.0} messages/s (the paper's T9000: 430000, 2.33 us of CPU each)\n"
                );
            }
        }
        s
    }
}

/// The distinct values of `v`, sorted.
fn distinct(v: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = v.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Writes `<dir>/mux-bandwidth.svg` (Figure 1: MB/s against message size, a line per layout
/// and N) and `<dir>/mux-short-rate.svg` (Figure 5: messages/s against links, a line per
/// message size), each where its figure was measured; returns the files written.
pub fn plot(r: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    if !r.multiplexed.is_empty() {
        let mut series = Vec::new();
        for layout in [Layout::OneLink, Layout::LinkPerChannel] {
            for n in distinct(r.multiplexed.iter().map(|x| x.channels)) {
                let points: Vec<(f64, f64)> = r
                    .multiplexed
                    .iter()
                    .filter(|x| x.layout == layout && x.channels == n)
                    .map(|x| (x.size as f64, x.mb_per_s))
                    .collect();
                series.push(Series {
                    label: format!("{} N={n}", layout.name()),
                    points,
                });
            }
        }
        let path = dir.join("mux-bandwidth.svg");
        let spec = Spec {
            title: format!(
                "[DS-link] Figure 1: N channels on one link vs a link each ({})",
                r.transport
            ),
            x_label: "message size (bytes)".into(),
            y_label: "MB/s, one way".into(),
            log_y: false,
        };
        plot_xy(&path, &spec, &series)?;
        out.push(path);
    }
    if !r.short_rate.is_empty() {
        let series: Vec<Series> = distinct(r.short_rate.iter().map(|x| x.size))
            .into_iter()
            .map(|z| Series {
                label: format!("{z} B"),
                points: r
                    .short_rate
                    .iter()
                    .filter(|x| x.size == z)
                    .map(|x| (x.links as f64, x.msgs_per_s))
                    .collect(),
            })
            .collect();
        let path = dir.join("mux-short-rate.svg");
        let spec = Spec {
            title: format!(
                "[DS-link] Figure 5: short messages, {} channels per link ({})",
                r.short_rate[0].per_link, r.transport
            ),
            x_label: "links".into(),
            y_label: "messages/s".into(),
            log_y: false,
        };
        plot_xy(&path, &spec, &series)?;
        out.push(path);
    }
    Ok(out)
}
