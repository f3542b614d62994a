//! Secrets out of the run folder: the settings stored in summary.json and report.html pass
//! through [`redact`] first.

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

/// Redacts `settings` in place:
/// - every string under a key that contains one of [`SECRET_KEY_PARTS`] (in nested objects
///   and arrays too);
/// - every value at one of `extra`: an entry starting with `/` is a JSON pointer (RFC 6901,
///   e.g. `/target/headers/X-Custom`); any other entry is a key name matched exactly
///   (case-insensitive) at any depth, whatever its value's type;
/// - the password of any `scheme://user:password@host` URL in a string.
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
        Value::String(s) => {
            if let Some(clean) = without_url_password(s) {
                *s = clean;
            }
        }
        _ => {}
    }
}

/// `https://user:pw@host/x` → `https://user:[redacted]@host/x`; `None` when there is no
/// password to hide.
fn without_url_password(s: &str) -> Option<String> {
    let scheme_end = s.find("://")? + 3;
    let rest = &s[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let colon = rest[..at].find(':')?;
    Some(format!(
        "{}{}:{}{}",
        &s[..scheme_end],
        &rest[..colon],
        REDACTED,
        &rest[at..]
    ))
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
        assert_eq!(
            v["target"]["url"],
            "http://bob:[redacted]@127.0.0.1:8080/mcp"
        );
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
    fn urls_without_passwords_are_untouched() {
        assert_eq!(without_url_password("http://127.0.0.1:80/a@b"), None);
        assert_eq!(without_url_password("http://user@host/"), None);
        assert_eq!(without_url_password("plain"), None);
    }
}
