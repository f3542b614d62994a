//! The OAuth client's own HTTP requests (metadata, registration, authorization, token), each
//! on a fresh connection of the transport's HTTP/1.1 client, so TLS options apply to them too.

use crate::transport::{HttpClient, HttpOptions, HttpTransport, McpHeaders, Reply, TlsOptions};
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Uri};
use serde_json::Value;
use std::time::Duration;

/// How the OAuth client reaches its servers.
#[derive(Clone, Debug)]
pub struct Net {
    pub tls: TlsOptions,
    pub connect_timeout: Duration,
    /// Bound on each request.
    pub timeout: Duration,
}

impl Net {
    /// A JSON document (metadata), by GET.
    pub async fn get_json(&self, url: &str) -> Result<Value, String> {
        let reply = self.request(url, Vec::new(), None).await?;
        if reply.status != 200 {
            return Err(format!("HTTP {}", reply.status));
        }
        json_of(&reply).ok_or_else(|| "no JSON document".to_owned())
    }

    /// A POST of `form` (`application/x-www-form-urlencoded`), with `headers` besides.
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, String)],
        mut headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Reply, String> {
        headers.push((
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        ));
        self.request(url, headers, Some(Bytes::from(form_body(form))))
            .await
    }

    /// A POST of a JSON document.
    pub async fn post_json(&self, url: &str, body: &Value) -> Result<Reply, String> {
        let headers = vec![(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )];
        self.request(url, headers, Some(Bytes::from(body.to_string())))
            .await
    }

    /// One request on a fresh connection: a GET, or a POST of `body`.
    pub async fn request(
        &self,
        url: &str,
        mut headers: Vec<(HeaderName, HeaderValue)>,
        body: Option<Bytes>,
    ) -> Result<Reply, String> {
        // The URL may carry secrets in its query (a code): only its origin is ever shown.
        let shown = super::origin(url).unwrap_or_else(|| "the URL".into());
        let uri: Uri = url.parse().map_err(|e| format!("url {shown}: {e}"))?;
        if !headers.iter().any(|(n, _)| n == http::header::ACCEPT) {
            headers.push((
                http::header::ACCEPT,
                HeaderValue::from_static("application/json"),
            ));
        }
        let opts = HttpOptions {
            pool_size: 1,
            headers,
            connect_timeout: self.connect_timeout,
            tls: self.tls.clone(),
            ..HttpOptions::default()
        };
        let client = HttpClient::new(&uri, &opts).map_err(|e| e.to_string())?;
        let mut t = HttpTransport::new(client, &opts);
        let reply = match body {
            Some(body) => {
                t.post_once(body, &McpHeaders::default(), self.timeout)
                    .await
            }
            None => t.get_once(self.timeout).await,
        };
        reply.map_err(|e| format!("{shown}: {e}"))
    }
}

/// The JSON document of an answer, if it is one.
pub fn json_of(reply: &Reply) -> Option<Value> {
    reply
        .messages
        .first()
        .and_then(|(_, b)| serde_json::from_slice(b).ok())
}

/// A form's body: `name=value&…`, each form-encoded.
pub fn form_body(form: &[(&str, String)]) -> String {
    let pairs: Vec<String> = form
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect();
    pairs.join("&")
}

/// `application/x-www-form-urlencoded` of one name or value.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space).
pub fn form_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded pairs of a query or form (`a=1&b=2`).
pub fn pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (form_decode(k), form_decode(v)),
            None => (form_decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_round_trip() {
        assert_eq!(form_encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(form_decode("a+b%26c%3Dd%2F%C3%A9"), "a b&c=d/é");
        assert_eq!(form_decode("100%"), "100%");
        assert_eq!(form_decode("%4"), "%4");
        assert_eq!(
            pairs("code=x%2By&state=&iss"),
            [
                ("code".into(), "x+y".into()),
                ("state".into(), String::new()),
                ("iss".into(), String::new())
            ]
        );
    }
}
