//! `[output]`: where a run's figures go besides its folder. `[output.prometheus]` pushes them
//! live by Prometheus remote write (docs/metrics-export.md); its rules are checked here, for
//! the profile and for `--prometheus-remote-write` alike.

use super::values;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// `[output]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// Live metrics pushed to a Prometheus remote write receiver every second
    /// (docs/metrics-export.md); `--prometheus-remote-write URL` gives the URL instead.
    pub prometheus: Option<PrometheusOutput>,
}

/// `[output.prometheus]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrometheusOutput {
    /// The remote write receiver, e.g. `"http://127.0.0.1:9090/api/v1/write"` (`http://`
    /// only); `--prometheus-remote-write` replaces it.
    pub url: Option<String>,
    /// Labels added to every series, e.g. `{ team = "search" }`; `testid` replaces its
    /// default, the run id (run_id, segment, step, level, operation, scenario, class, kind
    /// are mcpload's own).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Time between pushes, whole seconds (default `"1s"`).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub interval: Option<Duration>,
    /// Each push attempt's bound, and how long the run's end waits for the pushes still held
    /// (default `"5s"`).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    pub timeout: Option<Duration>,
    /// Pushes held at most while the receiver is slow or down (default 60); past it the
    /// oldest is dropped and counted.
    pub backlog: Option<usize>,
    /// Attempts after the first, per push, on 5xx, 429 or a connection failure (default 5).
    pub retries: Option<u32>,
}

/// Labels mcpload sets itself, which `labels` may not.
const RESERVED_LABELS: [&str; 9] = [
    "__name__",
    "run_id",
    "segment",
    "step",
    "level",
    "operation",
    "scenario",
    "class",
    "kind",
];

impl PrometheusOutput {
    /// Why the settings cannot be used: the field (its key under `[output.prometheus]`) and
    /// what would be valid.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let Some(url) = &self.url else {
            return Err((
                "url",
                "field `output.prometheus.url`: missing; give the receiver's URL, e.g. \
                 \"http://127.0.0.1:9090/api/v1/write\" (or --prometheus-remote-write URL)"
                    .into(),
            ));
        };
        check_url(url).map_err(|e| ("url", format!("field `output.prometheus.url`: {e}")))?;
        for name in self.labels.keys() {
            let why = if RESERVED_LABELS.contains(&name.as_str()) {
                format!("set by mcpload itself ({})", RESERVED_LABELS.join(", "))
            } else if !is_label_name(name) {
                "not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)".into()
            } else {
                continue;
            };
            return Err((
                "labels",
                format!("field `output.prometheus.labels`: {name:?} is {why}"),
            ));
        }
        if let Some(i) = self.interval
            && (i.is_zero() || i.subsec_nanos() != 0)
        {
            return Err((
                "interval",
                "field `output.prometheus.interval`: whole seconds, at least \"1s\" (the \
                 figures come once a second)"
                    .into(),
            ));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err((
                "timeout",
                "field `output.prometheus.timeout`: must be more than 0s".into(),
            ));
        }
        if self.backlog == Some(0) {
            return Err((
                "backlog",
                "field `output.prometheus.backlog`: at least 1 push".into(),
            ));
        }
        Ok(())
    }
}

/// An `http://` URL with a host: what the pusher speaks.
fn check_url(url: &str) -> Result<(), String> {
    let uri: Option<http::Uri> = url.parse().ok();
    match uri {
        Some(u) if u.scheme_str() == Some("http") && u.host().is_some_and(|h| !h.is_empty()) => {
            Ok(())
        }
        _ => Err(format!(
            "{url:?} is not an http:// URL of a remote write receiver, e.g. \
             \"http://127.0.0.1:9090/api/v1/write\""
        )),
    }
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_broken_setting_is_named() {
        let ok = PrometheusOutput {
            url: Some("http://127.0.0.1:9090/api/v1/write".into()),
            ..Default::default()
        };
        assert_eq!(ok.check(), Ok(()));
        let field = |p: PrometheusOutput| p.check().unwrap_err().0;
        assert_eq!(field(PrometheusOutput::default()), "url");
        let https = PrometheusOutput {
            url: Some("https://example.invalid/w".into()),
            ..ok.clone()
        };
        assert_eq!(field(https), "url");
        for bad in ["step", "9lives", "__x"] {
            let mut p = ok.clone();
            p.labels.insert(bad.into(), "v".into());
            assert_eq!(field(p), "labels", "{bad}");
        }
        let mut testid = ok.clone();
        testid.labels.insert("testid".into(), "nightly".into());
        assert_eq!(testid.check(), Ok(()));
        let half = PrometheusOutput {
            interval: Some(Duration::from_millis(1500)),
            ..ok.clone()
        };
        assert_eq!(field(half), "interval");
        let none = PrometheusOutput {
            backlog: Some(0),
            ..ok
        };
        assert_eq!(field(none), "backlog");
    }
}
