//! `bench hostile` (issue 46): the connect time of a certified client while a crowd of
//! connections that never prove who they are (silent, or trickling a byte now and then,
//! reconnecting whenever they are closed) is held open against the server, from other
//! loopback addresses (`127.0.0.2` and up) and from the client's own; and the throughput of
//! an established session with and without that crowd. On the link (`tls:` echo) and on NBD
//! (`--tls=require --tls-verify-peer`), both servers in this process, default limits.
//!
//! Each load runs in turn on a fresh server: `none` (no crowd), `silent`, `trickle`. A try
//! that fails (or takes longer than `clients::GIVE_UP`) is counted, not timed.

mod clients;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_access::crowd::{Crowd, CrowdOptions, CrowdStats, Target};
use offhost_bench::stats::percentile;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::tls::Pki;

/// What to measure.
#[derive(clap::Args, Debug, Clone)]
pub struct Options {
    /// Hostile connections held open at once.
    #[arg(long, default_value_t = 1000)]
    pub crowd: usize,
    /// Of them, the share from the client's own address (127.0.0.1), in percent.
    #[arg(long, default_value_t = 50)]
    pub own_percent: usize,
    /// Other source addresses the rest come from: 127.0.0.2 and up.
    #[arg(long, default_value_t = 64)]
    pub sources: u8,
    /// Connect tries of the certified client per load.
    #[arg(long, default_value_t = 50)]
    pub tries: usize,
    /// Milliseconds between a trickling connection's bytes.
    #[arg(long, default_value_t = 500)]
    pub trickle_ms: u64,
    /// Bytes of each message (link echo) or write (NBD) of the throughput run.
    #[arg(long, default_value_t = 1 << 20)]
    pub size: usize,
    /// Messages or writes of the throughput run.
    #[arg(long, default_value_t = 200)]
    pub count: usize,
    /// Which servers: link, nbd (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "link,nbd")]
    pub targets: Vec<String>,
}

/// One server under one load.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `link` or `nbd`.
    pub target: String,
    /// `none`, `silent` or `trickle`.
    pub load: String,
    /// Hostile connections held open.
    pub crowd: usize,
    /// Connect tries, and how many failed.
    pub tries: usize,
    /// Tries that failed.
    pub failed: usize,
    /// Connect time of the tries that succeeded, median, 99th percentile and longest (ms).
    pub connect_p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub connect_p99_ms: f64,
    /// Longest.
    pub connect_max_ms: f64,
    /// Throughput of an established session (MB/s).
    pub throughput_mb_s: f64,
    /// That over the same server's without a crowd, same run.
    pub throughput_vs_none: Option<f64>,
    /// What the crowd did: connections opened, and closed by the server.
    pub crowd_opened: u64,
    /// Closed by the server (evicted, or past their deadline).
    pub crowd_closed: u64,
    /// The first failure's reason, if any.
    pub first_failure: Option<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One row per server and load.
    pub rows: Vec<Row>,
    /// The open-descriptor limit the run raised itself to.
    pub nofile: u64,
}

impl Report {
    /// The rows as a text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<5} {:<8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>8}\n",
            "",
            "load",
            "crowd",
            "failed",
            "p50 ms",
            "p99 ms",
            "max ms",
            "MB/s",
            "vs none",
            "evicted"
        );
        for r in &self.rows {
            s += &format!(
                "{:<5} {:<8} {:>6} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>10.1} {:>8} {:>8}\n",
                r.target,
                r.load,
                r.crowd,
                format!("{}/{}", r.failed, r.tries),
                r.connect_p50_ms,
                r.connect_p99_ms,
                r.connect_max_ms,
                r.throughput_mb_s / 1e6,
                r.throughput_vs_none
                    .map_or("-".into(), |v| format!("{v:.2}")),
                r.crowd_closed,
            );
            if let Some(f) = &r.first_failure {
                s += &format!("      first failure: {f}\n");
            }
        }
        s
    }
}

/// The `q` quantile (nearest rank) of sorted `times`; NaN when there are none.
fn quantile(times: &[f64], q: f64) -> f64 {
    if times.is_empty() {
        return f64::NAN;
    }
    percentile(times, q)
}

/// Raises the soft limit of open descriptors to the hard one; returns it.
fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if let Some(max) = l.maximum {
        l.current = Some(max);
        let _ = setrlimit(Resource::Nofile, l);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// A server of one target, in this process.
enum Served {
    Link(String),
    Nbd(String),
}

fn serve(target: &str, pki: &Pki) -> Result<Served> {
    match target {
        "link" => {
            let s = offhost_link::Server::bind_with("tls:127.0.0.1:0", &pki.link_options())?;
            let url = s.url().to_owned();
            std::thread::Builder::new()
                .name("hostile-link".into())
                .spawn(move || offhost_link::serve_echo(&s))?;
            Ok(Served::Link(url))
        }
        "nbd" => {
            use offhost_nbd::{Export, ListenAddr, NbdTls, Server, TlsMode};
            let exports =
                vec![Export::from_spec("disk=mem:64M").map_err(|e| Error::Invalid(e.to_string()))?];
            let mut s = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None)
                .map_err(|e| Error::Peer(e.to_string()))?;
            let tls = NbdTls::new(TlsMode::Require, Some(pki.dir()), true)
                .map_err(|e| Error::Peer(e.to_string()))?;
            s.set_tls(tls);
            let addr = s.local_addr().trim_start_matches("tcp:").to_owned();
            std::thread::Builder::new()
                .name("hostile-nbd".into())
                .spawn(move || s.serve())?;
            Ok(Served::Nbd(addr))
        }
        other => Err(Error::Invalid(format!(
            "--targets: `{other}` is not link or nbd"
        ))),
    }
}

impl Served {
    fn addr(&self) -> &str {
        match self {
            Served::Link(url) => url.trim_start_matches("tls:"),
            Served::Nbd(addr) => addr,
        }
    }

    /// One certified client, up to its first answer; dropped at once.
    fn connect(&self, pki: &Pki) -> Result<()> {
        match self {
            Served::Link(url) => clients::link_connect(url, &pki.link_options()).map(drop),
            Served::Nbd(addr) => clients::nbd_connect(addr, pki.dir(), "disk").map(drop),
        }
    }

    fn throughput(&self, pki: &Pki, o: &Options) -> Result<f64> {
        match self {
            Served::Link(url) => {
                let s = clients::link_connect(url, &pki.link_options())?;
                clients::link_throughput(&s, o.size, o.count)
            }
            Served::Nbd(addr) => {
                let mut t = clients::nbd_connect(addr, pki.dir(), "disk")?;
                let size = u32::try_from(o.size.min(32 << 20)).unwrap_or(1 << 20);
                clients::nbd_throughput(&mut t, size, o.count as u64)
            }
        }
    }
}

/// The crowd of `load` against `served`.
fn crowd(o: &Options, load: &str, served: &Served) -> Result<Vec<Crowd>> {
    let trickle = match load {
        "none" => return Ok(Vec::new()),
        "silent" => None,
        _ => Some(Duration::from_millis(o.trickle_ms.max(1))),
    };
    let addr = served
        .addr()
        .parse()
        .map_err(|e| Error::Invalid(format!("{}: {e}", served.addr())))?;
    let own = o.crowd * o.own_percent.min(100) / 100;
    let others: Vec<IpAddr> = (0..o.sources.max(1))
        .map(|i| IpAddr::from([127, 0, 0, 2u8.saturating_add(i)]))
        .collect();
    let at_most = Duration::from_secs(3600);
    let mut parts = Vec::new();
    for (count, sources) in [
        (own, vec![IpAddr::from([127, 0, 0, 1])]),
        (o.crowd - own, others),
    ] {
        if count > 0 {
            parts.push(Crowd::start(CrowdOptions {
                target: Target::Tcp { addr, sources },
                count,
                trickle,
                at_most,
            })?);
        }
    }
    Ok(parts)
}

/// Runs every target under every load.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    let nofile = raise_nofile();
    if (nofile as usize) < 2 * o.crowd + 256 {
        return Err(Error::Invalid(format!(
            "--crowd {} needs about {} open descriptors; this process may have {nofile}",
            o.crowd,
            2 * o.crowd + 256
        )));
    }
    let pki = Pki::generate()?;
    let mut rows = Vec::new();
    for target in &o.targets {
        let mut baseline = None;
        for load in ["none", "silent", "trickle"] {
            bar.set_message(format!("hostile {target} {load}"));
            let served = serve(target, &pki)?;
            let crowd = crowd(o, load, &served)?;
            // Let the crowd reach the server before the client comes.
            std::thread::sleep(Duration::from_millis(if crowd.is_empty() {
                50
            } else {
                500
            }));
            let mut times = Vec::new();
            let mut failed = 0;
            let mut first_failure = None;
            for _ in 0..o.tries {
                let t0 = Instant::now();
                match served.connect(&pki) {
                    Ok(()) => times.push(t0.elapsed().as_secs_f64() * 1e3),
                    Err(e) => {
                        failed += 1;
                        first_failure.get_or_insert_with(|| e.to_string());
                    }
                }
                bar.tick();
            }
            let throughput = served.throughput(&pki, o)?;
            let stats = crowd
                .into_iter()
                .map(Crowd::stop)
                .fold(CrowdStats::default(), |a, b| CrowdStats {
                    opened: a.opened + b.opened,
                    closed_by_server: a.closed_by_server + b.closed_by_server,
                    failed: a.failed + b.failed,
                });
            if load == "none" {
                baseline = Some(throughput);
            }
            times.sort_by(f64::total_cmp);
            rows.push(Row {
                target: target.clone(),
                load: load.into(),
                crowd: if load == "none" { 0 } else { o.crowd },
                tries: o.tries,
                failed,
                connect_p50_ms: quantile(&times, 0.5),
                connect_p99_ms: quantile(&times, 0.99),
                connect_max_ms: times.last().copied().unwrap_or(f64::NAN),
                throughput_mb_s: throughput,
                throughput_vs_none: baseline.map(|b| throughput / b),
                crowd_opened: stats.opened,
                crowd_closed: stats.closed_by_server,
                first_failure,
            });
        }
    }
    Ok(Report { rows, nofile })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_crowd_run_measures_every_target_and_load() {
        let o = Options {
            crowd: 40,
            own_percent: 50,
            sources: 4,
            tries: 3,
            trickle_ms: 100,
            size: 64 << 10,
            count: 10,
            targets: vec!["link".into(), "nbd".into()],
        };
        let r = run(&o, &ProgressBar::hidden()).unwrap();
        assert_eq!(r.rows.len(), 6);
        for row in &r.rows {
            assert_eq!(row.failed, 0, "{row:?}");
            assert!(row.throughput_mb_s > 0.0, "{row:?}");
        }
        assert!(r.table().contains("trickle"));
    }
}
