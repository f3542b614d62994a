//! `[target.auth]` and `[target.tls]`: how a protected HTTP target is authorized and
//! trusted. A profile names environment variables, never credentials: a secret written in
//! it is refused with the way to do it instead.

use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;

/// `[target.auth]`: a static bearer token or the OAuth client credentials grant.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// The environment variable holding a static bearer token.
    pub bearer_env: Option<String>,
    /// The OAuth 2.1 client credentials grant.
    pub oauth: Option<OAuthSpec>,
    /// One token per virtual user (closed loop, `oauth` only), each fetched when its user
    /// first sends, instead of one shared by the run.
    #[serde(default)]
    pub token_per_user: bool,
    /// Refused (a secret in the profile): read only to say so; use `bearer_env`.
    #[serde(default)]
    #[schemars(schema_with = "refused")]
    pub token: Option<toml::Value>,
    /// Refused (a secret in the profile): read only to say so; use `bearer_env`.
    #[serde(default)]
    #[schemars(schema_with = "refused")]
    pub bearer: Option<toml::Value>,
}

/// `oauth = { … }`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthSpec {
    /// `client_credentials` (the default), or `authorization_code`: the tokens of an earlier
    /// `mcpload auth login`, refreshed with its refresh token.
    #[schemars(extend("enum" = ["client_credentials", "authorization_code"]))]
    pub grant: Option<String>,
    /// The client id as written (it is no secret); or `client_id_env`.
    pub client_id: Option<String>,
    /// The environment variable holding the client id; or `client_id`.
    pub client_id_env: Option<String>,
    /// The variable holding the client secret (`basic`, `post`).
    pub client_secret_env: Option<String>,
    /// The scope asked for (default: the target's challenge, else its `scopes_supported`).
    pub scope: Option<String>,
    /// The token endpoint (default: discovered from the target).
    pub token_endpoint: Option<String>,
    /// How the client authenticates to the token endpoint.
    #[serde(default)]
    pub auth_method: AuthMethod,
    /// `private_key_jwt`: the PEM private key (relative to the profile).
    pub private_key_file: Option<PathBuf>,
    /// `private_key_jwt`: the JWT algorithm (default from the key: `RS256` or `ES256`).
    pub key_alg: Option<String>,
    /// `private_key_jwt`: the key id (`kid`) of the assertion.
    pub key_id: Option<String>,
    /// `private_key_jwt`: the assertion's `aud`, `"issuer"` (default) or `"token_endpoint"`.
    #[serde(default)]
    pub jwt_audience: crate::auth::JwtAudience,
    /// `authorization_code`: a step-up (403 `insufficient_scope`) or a new authorization
    /// server is authorized anew without a browser, following the authorization endpoint's
    /// redirect: only for test servers that approve at once.
    #[serde(default)]
    pub login_follow_redirects: bool,
    /// Refused (a secret in the profile): read only to say so; use `client_secret_env`.
    #[serde(default)]
    #[schemars(schema_with = "refused")]
    pub client_secret: Option<toml::Value>,
}

/// How the client authenticates to the token endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// `client_secret_basic`.
    #[default]
    Basic,
    /// `client_secret_post`.
    Post,
    /// `private_key_jwt` (RFC 7523).
    PrivateKeyJwt,
}

impl AuthMethod {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "basic" => Ok(AuthMethod::Basic),
            "post" => Ok(AuthMethod::Post),
            "private_key_jwt" => Ok(AuthMethod::PrivateKeyJwt),
            _ => Err(format!("{s:?}: expected basic, post or private_key_jwt")),
        }
    }
}

/// `[target.tls]`: trust and identity for `https://` targets.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsSpec {
    /// PEM CA certificates trusted besides the platform's roots.
    pub cacert: Option<PathBuf>,
    /// A client certificate chain (PEM), for mutual TLS; with `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); with `client_cert`.
    pub client_key: Option<PathBuf>,
    /// No certificate check at all: loudly marked in the results.
    #[serde(default)]
    pub insecure: bool,
}

/// Schema of a key that is read only to be refused ([`AuthSpec::problem`]): no value passes.
fn refused(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"not": {}})
}

impl AuthSpec {
    /// Why this auth setup cannot work, with the field at fault (relative to
    /// `target.auth`) and what to write instead; `None` when it is sound.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.token.is_some() || self.bearer.is_some() {
            return Some((
                if self.token.is_some() {
                    "token"
                } else {
                    "bearer"
                },
                "a token is never written in a profile: put it in an environment variable \
                 and name it with `bearer_env = \"VAR\"`"
                    .into(),
            ));
        }
        match (&self.bearer_env, &self.oauth) {
            (Some(_), Some(_)) => Some((
                "oauth",
                "give `bearer_env` (a static token) or `oauth` (client credentials), not both"
                    .into(),
            )),
            (_, Some(o)) if self.token_per_user && o.is_authorization_code() => Some((
                "token_per_user",
                "one token per virtual user is for client credentials: a login's tokens are \
                 one user's"
                    .into(),
            )),
            (_, None) if self.token_per_user => Some((
                "token_per_user",
                "one token per virtual user is fetched with OAuth client credentials: give \
                 `oauth = { … }` (a static token, `bearer_env`, is one token for all)"
                    .into(),
            )),
            (None, None) => Some((
                "bearer_env",
                "give `bearer_env = \"VAR\"` (a static token) or `oauth = { client_id_env = \
                 \"ID\", client_secret_env = \"SECRET\" }`"
                    .into(),
            )),
            (Some(_), None) => None,
            (None, Some(o)) => o.problem(),
        }
    }
}

impl OAuthSpec {
    /// `grant = "authorization_code"`: the stored login's tokens.
    pub fn is_authorization_code(&self) -> bool {
        self.grant.as_deref() == Some("authorization_code")
    }

    fn problem(&self) -> Option<(&'static str, String)> {
        if self.client_secret.is_some() {
            return Some((
                "oauth.client_secret",
                "a client secret is never written in a profile: put it in an environment \
                 variable and name it with `client_secret_env = \"VAR\"`"
                    .into(),
            ));
        }
        if let Some(g) = self
            .grant
            .as_deref()
            .filter(|g| !matches!(*g, "client_credentials" | "authorization_code"))
        {
            return Some((
                "oauth.grant",
                format!("{g:?}: expected \"client_credentials\" or \"authorization_code\""),
            ));
        }
        if self.is_authorization_code() {
            // The client and its tokens come from the stored login; the id, if given,
            // picks among several logins, the secret is a pre-registered client's.
            return (self.client_id.is_some() && self.client_id_env.is_some()).then(|| {
                (
                    "oauth.client_id_env",
                    "give `client_id_env = \"VAR\"` or `client_id = \"ID\"`, not both".into(),
                )
            });
        }
        if self.client_id.is_some() == self.client_id_env.is_some() {
            return Some((
                "oauth.client_id_env",
                "give the client id: `client_id_env = \"VAR\"` or `client_id = \"ID\"` (one)"
                    .into(),
            ));
        }
        match self.auth_method {
            AuthMethod::Basic | AuthMethod::Post if self.client_secret_env.is_none() => Some((
                "oauth.client_secret_env",
                "`basic` and `post` need the secret: `client_secret_env = \"VAR\"`".into(),
            )),
            AuthMethod::PrivateKeyJwt if self.private_key_file.is_none() => Some((
                "oauth.private_key_file",
                "`private_key_jwt` needs `private_key_file = \"key.pem\"`".into(),
            )),
            AuthMethod::Basic | AuthMethod::Post if self.private_key_file.is_some() => Some((
                "oauth.private_key_file",
                "a private key is for `auth_method = \"private_key_jwt\"`".into(),
            )),
            AuthMethod::PrivateKeyJwt
                if self.token_endpoint.is_some()
                    && self.jwt_audience == crate::auth::JwtAudience::Issuer =>
            {
                Some((
                    "oauth.jwt_audience",
                    "the assertion's audience is the issuer, which only the authorization \
                     server's metadata names: leave out `token_endpoint` (it is discovered), \
                     or set `jwt_audience = \"token_endpoint\"`"
                        .into(),
                ))
            }
            _ => None,
        }
    }
}
