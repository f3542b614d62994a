//! The token store of `mcpload auth login`: the tokens of each (MCP URL, client) pair in
//! `$XDG_CONFIG_HOME/mcpload/tokens.json` (default `~/.config/mcpload/`), mode 0600, never in
//! a results folder. Every change is a read-modify-write under a lock file, written to a
//! temporary file and renamed over the store, so a reader never sees half a file and a
//! rotated refresh token is never lost.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What one login left: the client, where to refresh, and the tokens (secrets).
#[derive(Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The MCP endpoint's URL, as logged in to (the key, with `client_id`).
    pub url: String,
    /// The resource identifier (RFC 8707) sent with every grant.
    pub resource: String,
    pub client_id: String,
    /// How the client authenticates to the token endpoint: `none`, `client_secret_basic`,
    /// `client_secret_post`.
    pub auth_method: String,
    /// A secret the registration gave (absent for public and pre-registered clients: a
    /// pre-registered secret stays in the user's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub issuer: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    pub access_token: String,
    /// Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Unix seconds.
    pub saved_at: u64,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens and secrets never show.
        f.debug_struct("Entry")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("issuer", &self.issuer)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct Contents {
    version: u32,
    entries: Vec<Entry>,
}

/// The store's file.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A URL as a key: without a trailing slash.
pub fn key(url: &str) -> &str {
    url.trim_end_matches('/')
}

impl Store {
    /// `$XDG_CONFIG_HOME/mcpload`, else `$HOME/.config/mcpload`.
    pub fn open() -> Result<Store, String> {
        let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => PathBuf::from(h).join(".config"),
                None => {
                    return Err("no token store: neither XDG_CONFIG_HOME nor HOME is set".into());
                }
            },
        };
        Ok(Store {
            dir: base.join("mcpload"),
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("tokens.json")
    }

    /// Every entry (none when there is no store yet).
    pub fn entries(&self) -> Result<Vec<Entry>, String> {
        Ok(self.read()?.entries)
    }

    /// The entry of `url` (and of `client_id`, when given; else the newest for `url`).
    pub fn find(&self, url: &str, client_id: Option<&str>) -> Result<Option<Entry>, String> {
        Ok(self
            .read()?
            .entries
            .into_iter()
            .filter(|e| key(&e.url) == key(url) && client_id.is_none_or(|c| c == e.client_id))
            .max_by_key(|e| e.saved_at))
    }

    /// Saves `entry` in place of the one of the same URL and client.
    pub fn put(&self, entry: Entry) -> Result<(), String> {
        self.change(|c| {
            c.entries
                .retain(|e| !(key(&e.url) == key(&entry.url) && e.client_id == entry.client_id));
            c.entries.push(entry);
        })
        .map(|_| ())
    }

    /// Forgets the entries of `url` (every entry without one); how many were forgotten.
    pub fn remove(&self, url: Option<&str>) -> Result<usize, String> {
        self.change(|c| {
            let before = c.entries.len();
            c.entries
                .retain(|e| url.is_some_and(|u| key(&e.url) != key(u)));
            before - c.entries.len()
        })
    }

    fn read(&self) -> Result<Contents, String> {
        read_from(&self.path())
    }

    /// A read-modify-write under the lock.
    fn change<T>(&self, f: impl FnOnce(&mut Contents) -> T) -> Result<T, String> {
        let shown = |e: std::io::Error| format!("{}: {e}", self.dir.display());
        // 0700 from its creation on (never a moment readable by others), and made so if an
        // older one was not.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(shown)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: making it mode 0700: {e}", self.dir.display()))?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("tokens.lock"))
            .map_err(shown)?;
        #[cfg(target_os = "linux")]
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| shown(e.into()))?;
        let mut contents = self.read()?;
        let out = f(&mut contents);
        contents.version = 1;
        let text = serde_json::to_vec_pretty(&contents).map_err(|e| e.to_string())?;
        let tmp = self
            .dir
            .join(format!("tokens.json.{}.tmp", std::process::id()));
        // One left by a process of the same id that died mid-write: this one holds the lock.
        let _ = std::fs::remove_file(&tmp);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)?;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&tmp, self.path())?;
            // The rename itself made durable.
            std::fs::File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(shown)?;
        Ok(out)
    }
}

fn read_from(path: &Path) -> Result<Contents, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{}: not a token store ({e}); remove it and log in again",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Contents::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_0700_and_its_file_0600_and_no_temp_file_stays() {
        let base = std::env::temp_dir().join(format!("mcpload-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let store = Store {
            dir: base.join("config/mcpload"),
        };
        let entry = Entry {
            url: "http://127.0.0.1:1/mcp".into(),
            resource: "http://127.0.0.1:1/mcp".into(),
            client_id: "c".into(),
            auth_method: "none".into(),
            client_secret: None,
            issuer: "http://127.0.0.1:1".into(),
            token_endpoint: "http://127.0.0.1:1/token".into(),
            authorization_endpoint: None,
            access_token: "a".into(),
            expires_at: None,
            refresh_token: None,
            scope: None,
            saved_at: 1,
        };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        store.put(entry.clone()).unwrap();
        assert_eq!(mode(&store.dir), 0o700);
        assert_eq!(mode(&store.path()), 0o600);
        // An older directory others could read is made 0700.
        std::fs::set_permissions(&store.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        store.put(entry).unwrap();
        assert_eq!(mode(&store.dir), 0o700);
        let names: Vec<String> = std::fs::read_dir(&store.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
        assert_eq!(store.entries().unwrap().len(), 1);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
