//! `private_key_jwt` (RFC 7523 section 2.2, OpenID Connect Core section 9): the client's
//! assertion, a short-lived JWT signed with its private key (RSA or EC, PEM), sent in place
//! of a secret.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long an assertion is valid.
const ASSERTION_LIFETIME: Duration = Duration::from_secs(60);

/// A client's signing key.
pub struct JwtKey {
    key: EncodingKey,
    alg: Algorithm,
    kid: Option<String>,
    /// Makes every assertion's `jti` unique.
    seq: AtomicU64,
    salt: u64,
}

impl JwtKey {
    /// The PEM private key in `path`: RSA (`RS256` unless `alg` says `RS384`, `RS512`,
    /// `PS256`, …) or EC (`ES256` unless `alg` says `ES384`).
    pub fn from_pem_file(
        path: &Path,
        alg: Option<&str>,
        kid: Option<String>,
    ) -> Result<Self, String> {
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let named = alg
            .map(|a| {
                a.parse::<Algorithm>()
                    .map_err(|_| format!("key_alg {a:?}: not a JWT signing algorithm"))
            })
            .transpose()?;
        let (key, alg) = if let Ok(k) = EncodingKey::from_rsa_pem(&pem) {
            (k, named.unwrap_or(Algorithm::RS256))
        } else if let Ok(k) = EncodingKey::from_ec_pem(&pem) {
            (k, named.unwrap_or(Algorithm::ES256))
        } else {
            return Err(format!(
                "{}: no RSA or EC private key in PEM (PKCS#8 or PKCS#1)",
                path.display()
            ));
        };
        let key = JwtKey {
            key,
            alg,
            kid,
            seq: AtomicU64::new(0),
            salt: std::collections::hash_map::RandomState::new().hash_one(path),
        };
        // A key that cannot sign with its algorithm fails here, not at the first fetch.
        key.assertion("check", "check")?;
        Ok(key)
    }

    /// A fresh assertion of `client_id` for `audience` (the issuer or the token endpoint).
    pub fn assertion(&self, client_id: &str, audience: &str) -> Result<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let seq = self.seq.fetch_add(1, Relaxed);
        let claims = serde_json::json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now.as_secs(),
            "exp": (now + ASSERTION_LIFETIME).as_secs(),
            "jti": format!("{:016x}{:08x}{seq:x}", self.salt, now.subsec_nanos()),
        });
        let mut header = Header::new(self.alg);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| format!("signing the client assertion ({:?}): {e}", self.alg))
    }
}
