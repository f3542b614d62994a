//! One blocking HTTP/1.1 exchange over std's `TcpStream`, the whole of it under one deadline,
//! off any async runtime: the Metrics source's scrape (a GET, on the watch thread) and
//! `--prometheus-remote-write`'s pushes (a POST, on the exporter's sender thread).
//! Reads a `Content-Length`, chunked or close-delimited body; `http://` only.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A page larger than this is refused rather than read on: no metrics page is near it.
const MAX_RESPONSE: usize = 16 << 20;

/// GETs `url` within `timeout`; the body of a 200, or why not (e.g. "connection refused",
/// "HTTP 404").
pub(super) fn get(url: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    match exchange(
        url,
        "GET",
        "Accept: text/plain;version=0.0.4\r\n",
        &[],
        timeout,
    )? {
        (200, body) => Ok(body),
        (code, _) => Err(format!("HTTP {code}")),
    }
}

/// Sends one request (`headers`: whole lines, each ending in CRLF; `body` sent with its
/// `Content-Length` when not empty) within `timeout`: the answer's status and body, or why
/// there was none.
pub(crate) fn exchange(
    url: &str,
    method: &str,
    headers: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let deadline = Instant::now() + timeout;
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err("only http:// pages are read".to_owned());
    }
    let authority = uri.authority().ok_or("no host in the URL")?;
    let port = authority.port_u16().unwrap_or(80);
    // The Host header as the URL gave it, less any user:password@.
    let host_header = match authority.port() {
        Some(port) => format!("{}:{port}", authority.host()),
        None => authority.host().to_owned(),
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .collect();
    let mut last_error = format!("{host} has no address");
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, remaining(deadline, timeout)?) {
            Ok(connected) => {
                stream = Some(connected);
                break;
            }
            Err(e) => last_error = describe(&e, timeout),
        }
    }
    let mut stream = stream.ok_or(last_error)?;
    let length = if body.is_empty() {
        String::new()
    } else {
        format!("Content-Length: {}\r\n", body.len())
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: mcpload\r\n\
         {headers}{length}Connection: close\r\n\r\n"
    );
    stream
        .set_write_timeout(Some(remaining(deadline, timeout)?))
        .and_then(|()| stream.write_all(request.as_bytes()))
        .and_then(|()| stream.write_all(body))
        .map_err(|e| describe(&e, timeout))?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    // Each pass reads at least a byte or ends: bounded by MAX_RESPONSE and the deadline.
    loop {
        stream
            .set_read_timeout(Some(remaining(deadline, timeout)?))
            .map_err(|e| describe(&e, timeout))?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(describe(&e, timeout)),
        };
        response.extend_from_slice(&chunk[..n]);
        if let Some(answer) = complete_body(&response, n == 0)? {
            return Ok(answer);
        }
        if response.len() > MAX_RESPONSE {
            return Err(format!("the page is over {} MiB", MAX_RESPONSE >> 20));
        }
    }
}

/// The time left before `deadline`, or the timeout's error once it has passed.
fn remaining(deadline: Instant, timeout: Duration) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(no_answer(timeout));
    }
    Ok(left)
}

fn no_answer(timeout: Duration) -> String {
    format!("no answer within {}", humantime::format_duration(timeout))
}

fn describe(e: &std::io::Error, timeout: Duration) -> String {
    match e.kind() {
        ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        ErrorKind::TimedOut | ErrorKind::WouldBlock => no_answer(timeout),
        _ => e.to_string(),
    }
}

/// The status and body of `response` once it is all there (None while more is to come);
/// `at_eof` when the peer has closed, so nothing more will.
fn complete_body(response: &[u8], at_eof: bool) -> Result<Option<(u16, Vec<u8>)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut headers);
    let head_len = match head.parse(response) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if at_eof => {
            return Err("the connection closed before a response".to_owned());
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("not an HTTP response: {e}")),
    };
    let Some(code) = head.code else {
        return Err("no status code".to_owned());
    };
    // These never have a body (RFC 9110): a receiver's 204 is complete at its head.
    if code == 204 || code == 304 {
        return Ok(Some((code, Vec::new())));
    }
    let header = |name: &str| {
        head.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    let body = &response[head_len..];
    let complete = if header("transfer-encoding").is_some_and(|te| te.ends_with("chunked")) {
        dechunk(body)?
    } else if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("a Content-Length of {length:?}"))?;
        (body.len() >= length).then(|| body[..length].to_vec())
    } else {
        at_eof.then(|| body.to_vec())
    };
    match complete {
        None if at_eof => Err("the connection closed mid-body".to_owned()),
        complete => Ok(complete.map(|body| (code, body))),
    }
}

/// A chunked body decoded, once its last chunk is there (None before).
fn dechunk(mut body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut decoded = Vec::new();
    // Each pass consumes a chunk, so the passes are bounded by the body's length.
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_line = String::from_utf8_lossy(&body[..line_end]);
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("a chunk size of {size_hex:?}"))?;
        if size == 0 {
            return Ok(Some(decoded));
        }
        let data = &body[line_end + 2..];
        if data.len() < size + 2 {
            return Ok(None);
        }
        decoded.extend_from_slice(&data[..size]);
        body = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_by_length_by_chunks_and_to_the_close() {
        let by_length = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            complete_body(by_length, false),
            Ok(Some((200, b"hello".to_vec())))
        );
        assert_eq!(complete_body(&by_length[..40], false), Ok(None));
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                        3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(
            complete_body(chunked, false),
            Ok(Some((200, b"abcde".to_vec())))
        );
        assert_eq!(complete_body(&chunked[..55], false), Ok(None));
        assert!(
            complete_body(&chunked[..55], true)
                .unwrap_err()
                .contains("mid-body")
        );
        let to_close = b"HTTP/1.0 200 OK\r\n\r\nall of it";
        assert_eq!(complete_body(to_close, false), Ok(None));
        assert_eq!(
            complete_body(to_close, true),
            Ok(Some((200, b"all of it".to_vec())))
        );
        let missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(complete_body(missing, false), Ok(Some((404, Vec::new()))));
        let taken = b"HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n";
        assert_eq!(complete_body(taken, false), Ok(Some((204, Vec::new()))));
    }

    #[test]
    fn a_closed_port_is_connection_refused_and_https_is_not_read() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let refused = get(
            &format!("http://127.0.0.1:{port}/metrics"),
            Duration::from_secs(1),
        );
        assert_eq!(refused, Err("connection refused".to_owned()));
        let https = get("https://127.0.0.1:1/metrics", Duration::from_secs(1));
        assert_eq!(https, Err("only http:// pages are read".to_owned()));
    }
}
