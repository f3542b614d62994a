//! Secrets out of everything a run leaves behind: the settings stored in summary.json and
//! report.html pass through [`redact`], every URL shown anywhere through [`redact_url`], and
//! free text (an error message) through [`Secrets::scrub`].

use serde_json::Value;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Parts of a key name that mark its string values secret wherever they appear
/// (case-insensitive substring: `Authorization`, `GITHUB_TOKEN`, `client_secret`, ...).
pub const SECRET_KEY_PARTS: [&str; 9] = [
    "authorization",
    "token",
    "secret",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "cookie",
    "credential",
];

/// Shorter values are not scrubbed out of free text: replacing every `1` or `on` of an error
/// message would hide more than it protects.
const SHORTEST_SCRUBBED: usize = 4;

/// Redacts `settings` in place:
/// - every string under a key that contains one of [`SECRET_KEY_PARTS`] (in nested objects
///   and arrays too);
/// - every value at one of `extra`: an entry starting with `/` is a JSON pointer (RFC 6901,
///   e.g. `/target/headers/X-Custom`); any other entry is a key name matched exactly
///   (case-insensitive) at any depth, whatever its value's type;
/// - every URL in any other string, as [`redact_url`] shows it.
pub fn redact(settings: &mut Value, extra: &[String]) {
    for pointer in extra.iter().filter(|e| e.starts_with('/')) {
        if let Some(v) = settings.pointer_mut(pointer) {
            *v = Value::String(REDACTED.to_owned());
        }
    }
    let names: Vec<String> = extra
        .iter()
        .filter(|e| !e.starts_with('/'))
        .map(|e| e.to_ascii_lowercase())
        .collect();
    walk(settings, &names, false);
}

fn walk(v: &mut Value, names: &[String], secret: bool) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let key = k.to_ascii_lowercase();
                if names.contains(&key) {
                    *child = Value::String(REDACTED.to_owned());
                } else {
                    let secret_key = SECRET_KEY_PARTS.iter().any(|p| key.contains(p));
                    walk(child, names, secret || secret_key);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| walk(i, names, secret)),
        Value::String(s) if secret => *s = REDACTED.to_owned(),
        Value::String(s) => *s = redact_urls(s),
        _ => {}
    }
}

/// A URL cut into the parts that may hold a secret: `scheme://userinfo@host:port/path?query#fragment`.
struct UrlParts<'a> {
    /// `scheme://`
    scheme: &'a str,
    userinfo: Option<&'a str>,
    /// `host:port`
    host: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// `None` when `url` has no `scheme://`.
    fn of(url: &'a str) -> Option<Self> {
        let scheme_end = url.find("://")? + 3;
        let (scheme, rest) = url.split_at(scheme_end);
        let (rest, fragment) = match rest.split_once('#') {
            Some((r, f)) => (r, Some(f)),
            None => (rest, None),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        Some(UrlParts {
            scheme,
            userinfo,
            host,
            path,
            query,
            fragment,
        })
    }
}

/// A URL as it may be shown: its whole userinfo (a user name can be an API key too), every
/// query value and the fragment redacted; scheme, host, port and path kept.
/// `https://bob:pw@host/mcp?key=abc&v=2` → `https://[redacted]@host/mcp?key=[redacted]&v=[redacted]`.
pub fn redact_url(url: &str) -> String {
    let Some(p) = UrlParts::of(url) else {
        return url.to_owned();
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(p.scheme);
    if p.userinfo.is_some() {
        out.push_str(REDACTED);
        out.push('@');
    }
    out.push_str(p.host);
    out.push_str(p.path);
    if let Some(q) = p.query {
        out.push('?');
        let pairs: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, "")) => format!("{k}="),
                Some((k, _)) => format!("{k}={REDACTED}"),
                None if pair.is_empty() => String::new(),
                None => REDACTED.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if let Some(f) = p.fragment {
        out.push('#');
        if !f.is_empty() {
            out.push_str(REDACTED);
        }
    }
    out
}

/// The `host:port` of a URL, without its userinfo; `None` when it is no `scheme://` URL.
pub fn url_host(url: &str) -> Option<&str> {
    UrlParts::of(url).map(|p| p.host)
}

/// Every URL in `text` (a `scheme://` run up to white space, a quote or an angle bracket;
/// trailing punctuation left out) shown as [`redact_url`] shows it.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let start = rest[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |j| j + 1);
        let len = rest[i..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .map_or(rest.len(), |n| i + n);
        let end = rest[..len]
            .trim_end_matches([':', ',', '.', ';', ')', ']'])
            .len()
            .max(i + 3);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The secret values of one run (header values as written and as expanded, environment values,
/// a URL's userinfo and query values), to scrub out of free text such as error messages.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Adds one secret value (ignored when shorter than 4 characters).
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        if value.chars().count() >= SHORTEST_SCRUBBED && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_owned());
        }
    }

    /// Adds the userinfo and the query values of `url`.
    pub fn add_url(&mut self, url: &str) {
        let Some(p) = UrlParts::of(url) else { return };
        for part in p.userinfo.into_iter().flat_map(|u| u.split(':')) {
            self.add(part);
        }
        for pair in p.query.into_iter().flat_map(|q| q.split('&')) {
            self.add(pair.split_once('=').map_or(pair, |(_, v)| v));
        }
    }

    /// `text` with every URL shown as [`redact_url`] shows it and every secret value replaced.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = redact_urls(text);
        // Longest first, so a secret that holds another is replaced whole.
        let mut values: Vec<&String> = self.values.iter().collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        for v in values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_secret_keys_pointers_names_and_url_passwords() {
        let mut v = json!({
            "target": {
                "url": "http://bob:hunter2@127.0.0.1:8080/mcp",
                "headers": {"Authorization": "Bearer abc", "X-Trace": "keep", "X-Custom": "s3"},
                "env": {"GITHUB_TOKEN": "ghp_x", "PATH": "/usr/bin"},
                "args": ["--port", "1"]
            },
            "auth": {"client_secret": ["a", "b"], "user": "bob"},
            "max_tokens": 100,
            "session": {"id": 7}
        });
        redact(
            &mut v,
            &["/target/headers/X-Custom".to_owned(), "SESSION".to_owned()],
        );
        assert_eq!(v["target"]["url"], "http://[redacted]@127.0.0.1:8080/mcp");
        assert_eq!(v["target"]["headers"]["Authorization"], REDACTED);
        assert_eq!(v["target"]["headers"]["X-Custom"], REDACTED);
        assert_eq!(v["target"]["headers"]["X-Trace"], "keep");
        assert_eq!(v["target"]["env"]["GITHUB_TOKEN"], REDACTED);
        assert_eq!(v["target"]["env"]["PATH"], "/usr/bin");
        assert_eq!(v["target"]["args"], json!(["--port", "1"]));
        assert_eq!(v["auth"]["client_secret"], json!([REDACTED, REDACTED]));
        assert_eq!(v["auth"]["user"], "bob");
        // Numbers under a secret-looking key are no secret.
        assert_eq!(v["max_tokens"], 100);
        assert_eq!(v["session"], REDACTED);
    }

    #[test]
    fn a_url_keeps_its_host_and_path_and_nothing_secret() {
        let r = redact_url;
        assert_eq!(r("http://127.0.0.1:80/a@b"), "http://127.0.0.1:80/a@b");
        assert_eq!(r("http://sk_live@host/"), "http://[redacted]@host/");
        assert_eq!(
            r("https://u:p@ss@h:1/mcp?token=t&v=&flag#frag"),
            "https://[redacted]@h:1/mcp?token=[redacted]&v=&[redacted]#[redacted]"
        );
        assert_eq!(r("plain"), "plain");
        assert_eq!(url_host("http://u:p@h:8080/mcp?x=1"), Some("h:8080"));
        assert_eq!(url_host("http://[::1]:9?x"), Some("[::1]:9"));
    }

    #[test]
    fn free_text_loses_every_url_secret_and_every_known_value() {
        let mut s = Secrets::default();
        s.add("Bearer abc123");
        s.add("on");
        s.add_url("http://alice:pw-secret@h/mcp?api_key=k-secret");
        let text = "connecting to http://alice:pw-secret@h/mcp?api_key=k-secret: refused \
                    (sent Bearer abc123; user alice, key k-secret; debug on)";
        assert_eq!(
            s.scrub(text),
            "connecting to http://[redacted]@h/mcp?api_key=[redacted]: refused \
             (sent [redacted]; user [redacted], key [redacted]; debug on)"
        );
        assert_eq!(
            Secrets::default().scrub("url \"ws://a@b/\" and x://"),
            "url \"ws://[redacted]@b/\" and x://"
        );
    }
}
