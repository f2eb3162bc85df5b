//! `offhost bench nbd --tls` end to end: the real `offhost nbd` and nbdkit, each plain and
//! with `--tls=require --tls-verify-peer`, under fio in one run. No test asserts a timing.

mod common;

#[test]
fn bench_nbd_tls_measures_both_servers_plain_and_over_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let v = common::json_in(tmp.path(), "bench nbd --tls --runtime 1 --size 16M");
    let figs = v.as_array().expect("an array of figures");
    let servers = [
        "offhost",
        "nbdkit-memory",
        "offhost-tls",
        "nbdkit-memory-tls",
    ];
    assert_eq!(figs.len(), 4 * servers.len(), "{v}");
    for (i, f) in figs.iter().enumerate() {
        let server = servers[i % servers.len()];
        assert_eq!(f["server"], server, "{f}");
        // The keys of a run without TLS keep their names; the new ones are added.
        for k in ["workload", "iops", "mb_per_s", "rounds_iops", "fio_args"] {
            assert!(f.get(k).is_some(), "{k} missing: {f}");
        }
        assert!(f["iops"].as_f64().unwrap() > 0.0, "{f}");
        // The server's CPU comes from /proc/PID/stat in clock ticks (10 ms): the prefill, one
        // short pass over 16 MiB, may take less than a tick; the timed workloads cannot.
        let cpu = f["server_cpu_us_per_io"].as_f64().unwrap();
        if f["workload"].as_str().unwrap().ends_with("(prefill)") {
            assert!(cpu >= 0.0, "{f}");
        } else {
            assert!(cpu > 0.0, "{f}");
        }
        let tls = server.ends_with("-tls");
        assert_eq!(f["tls"], tls, "{f}");
        assert_eq!(f["transport"], "tcp", "{f}");
        assert_eq!(f["ratio_vs_plain"].as_f64().is_some(), tls, "{f}");
        assert_eq!(
            f["ratio_vs_nbdkit"].as_f64().is_some(),
            server.starts_with("offhost"),
            "{f}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
