//! A small HTTP/1.1 server for one page, a JSON API and one server-sent-events stream.
//!
//! Why not a framework: the dashboard answers six fixed GET paths and one event stream, and
//! tokio (already linked for zenoh) has what that needs; hyper + axum would add ~25 crates
//! to the build for routing we do not use. What keeps this small server robust: a request
//! head is read within [`HEAD_TIMEOUT`] and at most [`MAX_HEAD`] bytes; bodies are never
//! read; every response closes its connection; at most [`MAX_CONNECTIONS`] connections are
//! served at once (others get 503); writes to a stalled client time out; every error ends
//! only its own connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::fleet::FleetState;
use crate::page;
use crate::watch::lock;

/// Longest request head read (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// Time a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a write may block on a slow client before the connection is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once (event streams included).
pub const MAX_CONNECTIONS: usize = 64;
/// A comment line on an idle event stream this often keeps proxies from closing it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The page may load and fetch only from the dashboard itself.
const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'";

/// A parsed request line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `HEAD` (others are refused before routing).
    pub method: String,
    /// The path, without query string.
    pub path: String,
}

/// Why a request head is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not `METHOD SP TARGET SP HTTP/1.x`.
    Malformed,
    /// A method other than GET or HEAD.
    Method,
}

/// Parses the request line of `head` (the bytes up to the blank line).
///
/// # Errors
/// [`BadRequest`] for anything but `GET`/`HEAD` of an origin-form target over HTTP/1.x.
pub fn parse_request(head: &[u8]) -> Result<Request, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    let line = text.split("\r\n").next().ok_or(BadRequest::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(BadRequest::Malformed);
    }
    if method != "GET" && method != "HEAD" {
        return Err(BadRequest::Method);
    }
    let path = target.split(['?', '#']).next().unwrap_or("/");
    Ok(Request {
        method: method.to_string(),
        path: path.to_string(),
    })
}

/// What the server reads from: the latest `/api/fleet` document and the fleet picture
/// (for the history).
#[derive(Clone)]
pub struct App {
    /// The latest serialized `/api/fleet` document.
    pub fleet: watch::Receiver<Arc<str>>,
    /// The picture behind it.
    pub state: Arc<Mutex<FleetState>>,
}

/// Accepts connections until `stop` turns true.
pub async fn serve(listener: TcpListener, app: App, mut stop: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = stop.changed() => return,
        };
        let (mut stream, peer) = match conn {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "http accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                let _ = respond(&mut stream, "HEAD", 503, "text/plain", b"busy\n").await;
            });
            continue;
        };
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &app, stop).await {
                tracing::debug!(%peer, error = %e, "http connection ended");
            }
            drop(slot);
        });
    }
}

async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if buf.len() > MAX_HEAD {
            return Ok(Some(Vec::new()));
        }
    }
}

async fn handle(
    mut stream: TcpStream,
    app: &App,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(h))) => h,
        Ok(Ok(None)) | Err(_) => return Ok(()),
        Ok(Err(e)) => return Err(e),
    };
    let req = match parse_request(&head) {
        Ok(r) => r,
        Err(BadRequest::Method) => {
            return respond(&mut stream, "GET", 405, "text/plain", b"GET only\n").await
        }
        Err(BadRequest::Malformed) => {
            return respond(&mut stream, "GET", 400, "text/plain", b"bad request\n").await
        }
    };
    let m = req.method.as_str();
    const JSON: &str = "application/json";
    match req.path.as_str() {
        "/api/fleet" => {
            let doc = app.fleet.borrow().clone();
            respond(&mut stream, m, 200, JSON, doc.as_bytes()).await
        }
        "/api/history" => {
            let doc = lock(&app.state).history_json().to_string();
            respond(&mut stream, m, 200, JSON, doc.as_bytes()).await
        }
        "/api/events" if m == "GET" => events(stream, app.fleet.clone(), stop).await,
        p => match page::asset(p) {
            Some(a) => respond(&mut stream, m, 200, a.content_type, a.body.as_bytes()).await,
            None => respond(&mut stream, m, 404, "text/plain", b"not found\n").await,
        },
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    }
}

async fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(bytes)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

async fn respond(
    stream: &mut TcpStream,
    method: &str,
    code: u16,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nContent-Security-Policy: {CSP}\r\n\
         X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    );
    write_all(stream, head.as_bytes()).await?;
    if method != "HEAD" {
        write_all(stream, body).await?;
    }
    let _ = stream.shutdown().await;
    Ok(())
}

/// `text/event-stream`: the current `/api/fleet` document as event `fleet`, then each new
/// one, until the client goes or the server stops.
async fn events(
    mut stream: TcpStream,
    mut fleet: watch::Receiver<Arc<str>>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    write_all(
        &mut stream,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
          X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\nretry: 2000\n\n",
    )
    .await?;
    loop {
        let doc = fleet.borrow_and_update().clone();
        if !doc.is_empty() {
            write_all(
                &mut stream,
                format!("event: fleet\ndata: {doc}\n\n").as_bytes(),
            )
            .await?;
        }
        loop {
            tokio::select! {
                changed = fleet.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    break;
                }
                _ = stop.changed() => return Ok(()),
                _ = tokio::time::sleep(KEEP_ALIVE) => write_all(&mut stream, b": alive\n\n").await?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        let r = parse_request(b"GET /api/fleet?x=1 HTTP/1.1\r\nHost: a").expect("ok");
        assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/api/fleet"));
        assert_eq!(parse_request(b"POST / HTTP/1.1"), Err(BadRequest::Method));
        for bad in [
            &b""[..],
            b"GET",
            b"GET / HTTP/1.1 extra",
            b"GET http://x/ HTTP/1.1",
            b"GET / SPDY/3",
            b"\xff\xfe / HTTP/1.1",
        ] {
            assert_eq!(parse_request(bad), Err(BadRequest::Malformed), "{bad:?}");
        }
    }
}
