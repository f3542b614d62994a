//! `mcpload auth login | status | logout`: the authorization code login done once, whose
//! tokens `run --oauth-login` (or `oauth = { grant = "authorization_code" }`) refreshes at
//! load (docs/auth.md). No token is ever printed.

use crate::cli::UsageError;
use clap::{Args, Subcommand};
use mcpload::auth::login::{Approval, Login};
use mcpload::auth::store::{Store, unix_now};
use mcpload::report::{redact_url, redact_urls};
use std::path::Path;
use std::time::Duration;

/// How long a login waits for the redirect: a person in a browser, or a test server.
const WAIT_FOR_PERSON: Duration = Duration::from_secs(300);
const WAIT_FOR_TEST_SERVER: Duration = Duration::from_secs(30);

#[derive(Subcommand, Debug)]
pub(crate) enum AuthCommand {
    /// Log in to a protected MCP server with the authorization code grant (PKCE, a loopback
    /// redirect) and keep its tokens in $XDG_CONFIG_HOME/mcpload/tokens.json (mode 0600).
    Login(LoginArgs),
    /// List the stored logins: server, client, issuer, scope, when the access token
    /// expires, whether a refresh token is held (never the tokens).
    Status,
    /// Forget the stored login of a server (URL or PROFILE), or every login with --all.
    Logout(LogoutArgs),
}

#[derive(Args, Debug)]
pub(crate) struct LoginArgs {
    /// The MCP endpoint's URL, or a profile naming it (`target.url`, and its
    /// `[target.auth] oauth` client).
    pub target: String,
    /// Follow the authorization endpoint's redirect without a browser: works only with
    /// test servers that approve at once (`mcpload serve --auth --auth-code`, the conformance
    /// harness).
    #[arg(long)]
    pub login_follow_redirects: bool,
    /// Print the authorization URL instead of opening the system browser.
    #[arg(long, conflicts_with = "login_follow_redirects")]
    pub no_browser: bool,
    /// A pre-registered client id, or the URL of a client ID metadata document (CIMD) that
    /// you host [default: dynamic registration].
    #[arg(long, value_name = "ID", conflicts_with = "oauth_client_id_env")]
    pub oauth_client_id: Option<String>,
    /// The client id, read from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub oauth_client_id_env: Option<String>,
    /// A pre-registered client's secret, read from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub oauth_client_secret_env: Option<String>,
    /// The scope to ask for [default: the server's challenge, else its scopes_supported].
    #[arg(long, value_name = "SCOPE")]
    pub oauth_scope: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct LogoutArgs {
    /// The MCP endpoint's URL, or a profile naming it.
    #[arg(required_unless_present = "all")]
    pub target: Option<String>,
    /// Forget every stored login.
    #[arg(long, conflicts_with = "target")]
    pub all: bool,
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    UsageError(anyhow::anyhow!("{e}")).into()
}

/// What a login's target says: the URL, a profile's OAuth client settings and its TLS.
struct Target {
    url: String,
    oauth: Option<mcpload::profile::OAuthSpec>,
    tls: mcpload::transport::TlsOptions,
}

/// A URL as given, or a profile's `target.url`, its OAuth client settings and its
/// `[target.tls]` (paths relative to the profile).
fn target(given: &str) -> anyhow::Result<Target> {
    if given.starts_with("http://") || given.starts_with("https://") {
        return Ok(Target {
            url: given.to_owned(),
            oauth: None,
            tls: Default::default(),
        });
    }
    let path = Path::new(given);
    let profile = mcpload::profile::Source::read(path)
        .and_then(|s| s.parse())
        .map_err(usage)?;
    let t = profile.target.into_inner();
    let url = t.url.clone().ok_or_else(|| {
        usage(format!(
            "{given}: the profile names no target.url (and {given} is no http(s) URL)"
        ))
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let file = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| base.join(p));
    let tls = mcpload::transport::TlsOptions {
        cacert: file(&t.tls.cacert),
        client_cert: file(&t.tls.client_cert),
        client_key: file(&t.tls.client_key),
        insecure: t.tls.insecure,
    };
    Ok(Target {
        url,
        oauth: t.auth.and_then(|a| a.oauth),
        tls,
    })
}

fn env(flag: &str, var: &str) -> anyhow::Result<String> {
    std::env::var(var)
        .map_err(|_| usage(format!("{flag}: the environment variable {var} is not set")))
}

impl AuthCommand {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let store = Store::open().map_err(usage)?;
        match self {
            AuthCommand::Login(a) => a.run(&store).await,
            AuthCommand::Status => status(&store),
            AuthCommand::Logout(a) => {
                let url = a.target.as_deref().map(target).transpose()?.map(|t| t.url);
                let n = store.remove(url.as_deref()).map_err(anyhow::Error::msg)?;
                match url {
                    Some(u) => println!("forgot {n} login(s) to {u}"),
                    None => println!("forgot every login ({n})"),
                }
                Ok(())
            }
        }
    }
}

impl LoginArgs {
    async fn run(self, store: &Store) -> anyhow::Result<()> {
        let Target {
            url,
            oauth: profile,
            tls,
        } = target(&self.target)?;
        let client_id = match (&self.oauth_client_id, &self.oauth_client_id_env) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(var)) => Some(env("--oauth-client-id-env", var)?),
            (None, None) => match profile.as_ref() {
                Some(o) => match (&o.client_id, &o.client_id_env) {
                    (Some(id), _) => Some(id.clone()),
                    (None, Some(var)) => Some(env("target.auth.oauth.client_id_env", var)?),
                    _ => None,
                },
                None => None,
            },
        };
        let secret_var = self
            .oauth_client_secret_env
            .clone()
            .or_else(|| profile.as_ref().and_then(|o| o.client_secret_env.clone()));
        let client_secret = secret_var
            .map(|var| env("--oauth-client-secret-env", &var))
            .transpose()?;
        let approval = if self.login_follow_redirects {
            Approval::FollowRedirects
        } else if self.no_browser {
            Approval::Print
        } else {
            Approval::Browser
        };
        let login = Login {
            url: url.clone(),
            net: mcpload::auth::Net {
                tls,
                connect_timeout: Duration::from_secs(10),
                timeout: Duration::from_secs(30),
            },
            client_id,
            client_secret,
            scope: self
                .oauth_scope
                .clone()
                .or_else(|| profile.and_then(|o| o.scope)),
            approval,
            wait: if self.login_follow_redirects {
                WAIT_FOR_TEST_SERVER
            } else {
                WAIT_FOR_PERSON
            },
        };
        let entry = login
            .run()
            .await
            .map_err(|e| anyhow::anyhow!("login to {}: {}", redact_url(&url), redact_urls(&e)))?;
        let summary = describe(&entry);
        store.put(entry).map_err(anyhow::Error::msg)?;
        println!("logged in to {}: {summary}", redact_url(&url));
        println!("tokens saved in {}", store.path().display());
        Ok(())
    }
}

/// One login in words, without its tokens.
fn describe(e: &mcpload::auth::store::Entry) -> String {
    let expires = match e.expires_at {
        Some(at) if at > unix_now() => format!("expires in {} s", at - unix_now()),
        Some(_) => "expired".into(),
        None => "no expiry given".into(),
    };
    format!(
        "client {}, issuer {}, scope {}, access token {expires}, refresh token {}",
        e.client_id,
        e.issuer,
        e.scope.as_deref().unwrap_or("(none)"),
        if e.refresh_token.is_some() {
            "held"
        } else {
            "none"
        }
    )
}

fn status(store: &Store) -> anyhow::Result<()> {
    let entries = store.entries().map_err(anyhow::Error::msg)?;
    if entries.is_empty() {
        println!("no stored logins ({})", store.path().display());
    }
    for e in &entries {
        println!("{}: {}", redact_url(&e.url), describe(e));
    }
    Ok(())
}
