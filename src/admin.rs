//! Admin HTTP: `/metrics` (Prometheus text), `/health` (the process answers), `/ready` (the zone
//! has had its first full sync, and no shutdown has begun).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::zone::Zone;

pub fn reply(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

fn route(
    method: &Method,
    path: &str,
    zone: &Zone,
    metrics: &Metrics,
    shutdown: &Shutdown,
) -> Response<Full<Bytes>> {
    let ready = || {
        if shutdown.stopping() {
            Err("shutting down (lame duck)".into())
        } else if zone.synced() {
            Ok(())
        } else {
            Err("the source has not been fully synced yet".into())
        }
    };
    answer(method, path, || metrics.render(), ready)
}

/// The answer of an admin server (the DNS server's, the bridge's) to `method` `path`: the
/// Prometheus text `metrics` renders, `ok` on `/health`, and on `/ready` whether `ready` says
/// it is (else why not); each is worked out only for its own path.
pub fn answer<B: Into<Bytes>>(
    method: &Method,
    path: &str,
    metrics: impl FnOnce() -> B,
    ready: impl FnOnce() -> Result<(), String>,
) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != Method::GET && method != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "only GET and HEAD\n");
    }
    match path {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            metrics(),
        ),
        "/health" => reply(StatusCode::OK, TEXT, "ok\n"),
        "/ready" => match ready() {
            Ok(()) => reply(StatusCode::OK, TEXT, "ready\n"),
            Err(why) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                format!("not ready: {why}\n"),
            ),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "not found: try /metrics, /health or /ready\n",
        ),
    }
}

/// Serves admin requests until `stop`; `/ready` is 503 from the start of `shutdown`'s lame duck.
pub async fn serve(
    listener: TcpListener,
    zone: Arc<Zone>,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    stop: CancellationToken,
) {
    serve_with(listener, stop, move |method, path| {
        route(method, path, &zone, &metrics, &shutdown)
    })
    .await;
}

/// Serves HTTP/1 requests on `listener` until `stop`, each answered by `route` from its method
/// and path (the DNS server's and the bridge's admin servers).
pub async fn serve_with<R>(listener: TcpListener, stop: CancellationToken, route: R)
where
    R: Fn(&Method, &str) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let route = Arc::new(route);
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    debug!(error = %e, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let route = route.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let resp = route(req.method(), req.uri().path());
            async move { Ok::<_, Infallible>(resp) }
        });
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                debug!(error = %e, "admin connection ended with an error");
            }
        });
    }
}
