//! The HTTP side: hyper on a one-thread tokio runtime of the view's own, read-only routes,
//! a bounded number of connections, a push channel per page (server-sent events carrying
//! changes only), TLS with client certificates where configured.
//!
//! | route | answers |
//! |---|---|
//! | `GET /` (`/view.js`, `/view.css`) | the page, built into the binary |
//! | `GET /api/pipelines` | the pipelines, running and ended: id, name, state, error |
//! | `GET /api/pipelines/ID` | one pipeline: shape, statistics (as a daemon's `status`), state, error, what its tasks show |
//! | `GET /api/pipelines/ID/dot` | its graph as Graphviz dot, with its numbers |
//! | `GET /api/pipelines/ID/shown/TASK/NAME.png` | a picture task `TASK` shows as `NAME` |
//! | `GET /api/events[?pipeline=ID]` | server-sent events: first everything, then changes (`{"set":{path:value},"del":[path]}`) a period apart |

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::doc::Flat;
use crate::sample::{Sampler, Snapshot};

type Body = BoxBody<Bytes, Infallible>;

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) sampler: Arc<Sampler>,
    pub(crate) snapshots: watch::Receiver<Arc<Snapshot>>,
    pub(crate) clients: usize,
    pub(crate) stall: Duration,
    pub(crate) started: Instant,
}

/// Serves `listener` until the runtime ends.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let tls = tls.clone();
        tokio::spawn(async move {
            let over = shared.sampler.clients.fetch_add(1, Ordering::Relaxed) >= shared.clients;
            let _count = Count(Arc::clone(&shared.sampler));
            match tls {
                Some(acceptor) => {
                    let hs = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp));
                    if let Ok(Ok(stream)) = hs.await {
                        connection(stream, shared, over).await;
                    }
                }
                None => connection(tcp, shared, over).await,
            }
        });
    }
}

/// Counts a connection until it ends.
struct Count(Arc<Sampler>);

impl Drop for Count {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection: requests until it closes, or until its push channel stalls.
async fn connection<S>(stream: S, shared: Arc<Shared>, over: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // Milliseconds since start since when a message of this connection's push channel waits
    // for the client to take it (u64::MAX: none waits).
    let read_at = Arc::new(AtomicU64::new(u64::MAX));
    let svc_shared = Arc::clone(&shared);
    let svc_read = Arc::clone(&read_at);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&svc_shared);
        let read_at = Arc::clone(&svc_read);
        async move {
            Ok::<_, Infallible>(if over {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the view serves at most {} clients at once", shared.clients),
                )
            } else {
                // Off the runtime's one thread: a look can wait on a peer (a part's engine,
                // for `submit --view`), which must stall no other connection.
                let (method, uri) = (req.method().clone(), req.uri().clone());
                let answer =
                    tokio::task::spawn_blocking(move || route(&method, &uri, &shared, read_at));
                answer.await.unwrap_or_else(|e| {
                    text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the view failed: {e}"),
                    )
                })
            })
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .max_buf_size(64 * 1024)
        .keep_alive(!over)
        .serve_connection(TokioIo::new(stream), service);
    let stall = shared.stall;
    let started = shared.started;
    let watchdog = async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let at = read_at.load(Ordering::Relaxed);
            let now = started.elapsed().as_millis() as u64;
            if at != u64::MAX && now.saturating_sub(at) > stall.as_millis() as u64 {
                return;
            }
        }
    };
    tokio::select! {
        _ = conn => {}
        _ = watchdog => {}
    }
}

fn full(status: StatusCode, kind: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", kind)
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .body(Full::new(body.into()).boxed())
        .expect("a valid response")
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    full(status, "text/plain; charset=utf-8", body)
}

fn json(v: &serde_json::Value) -> Response<Body> {
    full(StatusCode::OK, "application/json", v.to_string())
}

/// Answers one request.
fn route(method: &Method, uri: &Uri, shared: &Shared, read_at: Arc<AtomicU64>) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "the view is read-only: GET only".into(),
        );
    }
    let path = uri.path();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let source = &*shared.sampler.source;
    // A request for one pipeline looks at that one alone.
    let one = |id: &str| id.parse().ok().map(|id| (id, Snapshot::one(source, id)));
    match parts.as_slice() {
        [""] | ["index.html"] => full(
            StatusCode::OK,
            "text/html; charset=utf-8",
            crate::page::HTML,
        ),
        ["view.js"] => full(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            crate::page::JS,
        ),
        ["view.css"] => full(StatusCode::OK, "text/css; charset=utf-8", crate::page::CSS),
        ["api", "pipelines"] => json(&Snapshot::take(source).list()),
        ["api", "pipelines", id] => match one(id).and_then(|(id, s)| s.doc(id)) {
            Some(d) => json(&d),
            None => no_pipeline(id),
        },
        ["api", "pipelines", id, "dot"] => match one(id).and_then(|(id, s)| s.dot(id)) {
            Some(d) => full(StatusCode::OK, "text/vnd.graphviz; charset=utf-8", d),
            None => no_pipeline(id),
        },
        ["api", "pipelines", id, "shown", task, file] => {
            let name = file.strip_suffix(".png").unwrap_or(file);
            // The sampler's last look first (what the page was told of), else a fresh one.
            let pic = match (id.parse(), task.parse()) {
                (Ok(id), Ok(task)) => (shared.snapshots.borrow().picture(id, task, name))
                    .or_else(|| Snapshot::one(source, id).picture(id, task, name)),
                _ => None,
            };
            match pic.map(|p| crate::png::encode(&p)) {
                Some(Ok(png)) => full(StatusCode::OK, "image/png", png),
                Some(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e),
                None => text(
                    StatusCode::NOT_FOUND,
                    format!("pipeline {id} task {task} shows no picture '{name}'"),
                ),
            }
        }
        ["api", "events"] => {
            let selected = uri
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|kv| kv.strip_prefix("pipeline=")?.parse().ok());
            events(shared, selected, read_at)
        }
        _ => text(StatusCode::NOT_FOUND, format!("no such page: {path}")),
    }
}

fn no_pipeline(id: &str) -> Response<Body> {
    text(StatusCode::NOT_FOUND, format!("no pipeline {id}"))
}

/// The push channel: everything first, then what changed, each time the sampler looks. The
/// next message is made only when the client has taken the last one, so a client that reads
/// slowly skips looks and holds one message at most.
fn events(shared: &Shared, selected: Option<u64>, read_at: Arc<AtomicU64>) -> Response<Body> {
    let mut rx = shared.snapshots.clone();
    let started = shared.started;
    let first = Snapshot::take(&*shared.sampler.source).flat(selected);
    let state = (rx.clone(), Flat::default(), Some(first));
    rx.mark_changed();
    let stream = futures_util::stream::unfold(state, move |(mut rx, before, first)| {
        let read_at = Arc::clone(&read_at);
        async move {
            // The client took the last message: nothing waits on it now.
            read_at.store(u64::MAX, Ordering::Relaxed);
            let mut now = match first {
                Some(f) => f,
                None => {
                    rx.changed().await.ok()?;
                    let snap = Arc::clone(&rx.borrow_and_update());
                    snap.flat(selected)
                }
            };
            let mut changes = now.changes(&before);
            while changes.is_none() {
                rx.changed().await.ok()?;
                let snap = Arc::clone(&rx.borrow_and_update());
                now = snap.flat(selected);
                changes = now.changes(&before);
            }
            let msg = format!("data: {}\n\n", changes.expect("some changes"));
            // A message waits for the client from now until it asks for the next.
            read_at.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(msg))),
                (rx, now, None),
            ))
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-store")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("a valid response")
}
