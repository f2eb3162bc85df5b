//! `offhost submit --engine NAME=URL --engine NAME=URL ... FILE`: one pipeline over several
//! engines (`@NAME` placements; see `offhost_engine::placement`).
//!
//! The parts are submitted sinks first (each part names the pipeline ids of the parts it
//! sends to); a part that is refused stops the parts already running. Then every part is
//! waited for on a session of its own; the first failure (a part that fails, or an engine
//! whose session breaks) stops every other part, and the error names the engine and what
//! failed there. The statistics of all parts come out as one table with an engine column.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use offhost_engine::daemon::{Client, Submitted};
use offhost_engine::placement;
use offhost_engine::{Registry, Stats};
use offhost_link::LinkOptions;
use serde_json::{json, Value};

use crate::engine_table::render_engines;

/// `NAME=URL` engines, or `None` when `list` is one plain URL.
pub fn named(list: &[String]) -> anyhow::Result<Option<Vec<(String, String)>>> {
    let is_named = |s: &str| {
        s.split_once('=').is_some_and(|(n, u)| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                && u.contains(':')
        })
    };
    if list.len() == 1 && !is_named(&list[0]) {
        return Ok(None);
    }
    let mut v: Vec<(String, String)> = Vec::new();
    for s in list {
        let Some((n, u)) = s.split_once('=').filter(|_| is_named(s)) else {
            bail!("--engine {s}: with several engines each is NAME=URL (e.g. recon=tls:host:7460)");
        };
        if v.iter().any(|(m, _)| m == n) {
            bail!("--engine {s}: engine {n} is named twice");
        }
        v.push((n.to_owned(), u.to_owned()));
    }
    Ok(Some(v))
}

/// One engine's part once submitted.
struct Part {
    engine: String,
    url: String,
    client: Client,
    sub: Submitted,
}

/// How long the other parts get after the first failure to end by themselves (their links to
/// the failed part break, and they fail naming it) before the submitter tells them to stop.
const GRACE: Duration = Duration::from_millis(500);
/// How long the submitter then waits for the parts it told to stop.
const AFTER_FAILURE: Duration = Duration::from_secs(10);

/// Runs `text` (read from `path`) over `engines` with their host channels bridged to files.
#[allow(clippy::too_many_arguments)]
pub fn submit(
    path: &str,
    text: &str,
    engines: &[(String, String)],
    options: &LinkOptions,
    registry: &Registry,
    outs: &[String],
    ins: &[String],
    detach: bool,
    json_out: bool,
) -> anyhow::Result<()> {
    let spec = offhost_engine::lang::parse(text).map_err(|e| anyhow!("{path}: {e}"))?;
    let names: Vec<String> = engines.iter().map(|(n, _)| n.clone()).collect();
    let url_of: HashMap<&str, &str> = engines
        .iter()
        .map(|(n, u)| (n.as_str(), u.as_str()))
        .collect();
    let plan = placement::plan(&spec, &names, registry).map_err(|e| anyhow!("{path}: {e}"))?;
    let mut targets: HashMap<String, (String, u64)> = HashMap::new();
    let mut parts: Vec<Part> = Vec::new();
    for e in plan.order() {
        let url = url_of[e.as_str()];
        let part = plan.text(e, &targets).map_err(|e| anyhow!("{path}: {e}"))?;
        let submitted = Client::connect_with(url, options)
            .map_err(|err| anyhow!("engine {e} ({url}): {err}"))
            .and_then(|c| {
                let sub = c
                    .submit(&part)
                    .map_err(|err| anyhow!("{path}: engine {e} ({url}) refused its part: {err}"))?;
                Ok((c, sub))
            });
        match submitted {
            Ok((client, sub)) => {
                eprintln!("pipeline {} started on engine {e} ({url})", sub.id);
                targets.insert(e.clone(), (url.to_owned(), sub.id));
                parts.push(Part {
                    engine: e.clone(),
                    url: url.to_owned(),
                    client,
                    sub,
                });
            }
            Err(err) => {
                stop_all(&parts);
                return Err(err);
            }
        }
    }
    if detach {
        for p in &parts {
            println!("{} {}", p.engine, p.sub.id);
        }
        return Ok(());
    }
    let generated: Vec<&str> = plan
        .cross_queues()
        .iter()
        .map(|c| c.channel.as_str())
        .collect();
    let bridges = match bridge_all(&parts, &generated, outs, ins) {
        Ok(b) => b,
        Err(e) => {
            stop_all(&parts);
            return Err(e);
        }
    };
    let (tx, rx) = mpsc::channel();
    for p in &parts {
        let (tx, engine, url, id) = (tx.clone(), p.engine.clone(), p.url.clone(), p.sub.id);
        let options = options.clone();
        std::thread::spawn(move || {
            let r = Client::connect_with(&url, &options)
                .and_then(|c| c.wait(id))
                .map_err(|e| e.to_string());
            let _ = tx.send((engine, r));
        });
    }
    drop(tx);
    let mut results: HashMap<String, Value> = HashMap::new();
    let mut failure: Option<String> = None;
    // After a failure: when to tell the others to stop, and when to give up on them.
    let mut stop_at: Option<Instant> = None;
    let mut give_up: Option<Instant> = None;
    while results.len() < parts.len() {
        let next = match (stop_at, give_up) {
            (Some(d), _) | (None, Some(d)) => {
                rx.recv_timeout(d.saturating_duration_since(Instant::now()))
            }
            (None, None) => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let (engine, r) = match next {
            Ok(x) => x,
            Err(mpsc::RecvTimeoutError::Timeout) if stop_at.is_some() => {
                stop_all(&parts);
                stop_at = None;
                continue;
            }
            Err(_) => break,
        };
        let url = url_of[engine.as_str()];
        let v = match r {
            Ok(v) => v,
            Err(e) => {
                let e = format!(
                    "engine {engine} ({url}) is gone ({e}) while running {}",
                    plan.tasks_on(&engine)
                );
                json!({"state": "lost", "error": e})
            }
        };
        if failure.is_none() {
            if let Some(e) = v["error"].as_str() {
                let e = if e.contains(&format!("engine {engine}")) {
                    e.to_owned()
                } else {
                    format!("engine {engine} ({url}): {e}")
                };
                failure = Some(e);
                stop_at = Some(Instant::now() + GRACE);
                give_up = Some(Instant::now() + GRACE + AFTER_FAILURE);
            }
        }
        results.insert(engine, v);
    }
    for b in bridges {
        if failure.is_some() {
            break;
        }
        b.join()
            .map_err(|_| anyhow!("a channel thread panicked"))??;
    }
    report(&parts, &results, plan.file_lines(), json_out)?;
    match failure {
        Some(e) => Err(anyhow!("{path}: {e}")),
        None => Ok(()),
    }
}

/// Tells every part to stop its sources (best effort: an engine that is gone is gone).
fn stop_all(parts: &[Part]) {
    for p in parts {
        let _ = p.client.stop(p.sub.id);
    }
}

type Bridge = std::thread::JoinHandle<anyhow::Result<()>>;

/// Bridges the user's host channels of every part (not the ones between engines) to files,
/// as `offhost submit` does for one engine.
fn bridge_all(
    parts: &[Part],
    generated: &[&str],
    outs: &[String],
    ins: &[String],
) -> anyhow::Result<Vec<Bridge>> {
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut all_out = Vec::new();
    let mut all_in = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        for n in p.sub.host_out.iter().chain(&p.sub.host_in) {
            if generated.contains(&n.as_str()) {
                continue;
            }
            if owner.insert(n.clone(), i).is_some() {
                bail!("host channel {n} is on two engines: give the channels distinct names");
            }
        }
        all_out.extend(p.sub.host_out.iter().cloned());
        all_in.extend(
            p.sub
                .host_in
                .iter()
                .filter(|n| !generated.contains(&n.as_str()))
                .cloned(),
        );
    }
    let mut bridges = Vec::new();
    for (n, path) in crate::engine_cmd::bindings(outs, ins, &all_out, &all_in)?.outputs {
        let p = &parts[owner[&n]];
        bridges.push(crate::engine_cmd::bridge_output(
            p.client.open_output(p.sub.id, &n)?,
            &path,
        )?);
    }
    for (n, path) in crate::engine_cmd::bindings(outs, ins, &all_out, &all_in)?.inputs {
        let p = &parts[owner[&n]];
        crate::engine_cmd::bridge_input(p.client.open_input(p.sub.id, &n)?, &path)?;
    }
    Ok(bridges)
}

/// Prints the merged statistics (or JSON: one object per engine).
fn report(
    parts: &[Part],
    results: &HashMap<String, Value>,
    file_lines: usize,
    json_out: bool,
) -> anyhow::Result<()> {
    if json_out {
        let v: Vec<Value> = parts
            .iter()
            .map(|p| {
                let r = results.get(&p.engine).cloned().unwrap_or(Value::Null);
                json!({
                    "engine": p.engine,
                    "url": p.url,
                    "id": p.sub.id,
                    "state": r["state"],
                    "error": r["error"],
                    "stats": r["stats"],
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "engines": v }))?
        );
        return Ok(());
    }
    let mut rows: Vec<(String, Stats)> = Vec::new();
    for p in parts {
        let r = results.get(&p.engine);
        let state = r.and_then(|r| r["state"].as_str()).unwrap_or("unknown");
        eprintln!(
            "engine {} ({}): pipeline {} {state}",
            p.engine, p.url, p.sub.id
        );
        if let Some(stats) =
            r.and_then(|r| serde_json::from_value::<Stats>(r["stats"].clone()).ok())
        {
            rows.push((p.engine.clone(), stats));
        }
    }
    print!("{}", render_engines(&rows, file_lines));
    Ok(())
}
