//! `[races]`: the calls `mcpload probe --races` makes for each race check and the paths it
//! reads their answers at. Calls are written as a scenario's (`{{var.key}}` is the check's
//! own fresh key: one counter, one idempotency key); checked into [`RaceChecks`], every
//! mistake placed in the file.

use super::expr::Path;
use super::scenario::Call;
use super::template::{self, Hole, Piece};
use super::values::{self, check_templates};
use super::{ProfileError, Source, required_field};
use schemars::JsonSchema;
use serde::Deserialize;
use std::ops::Range;
use std::time::Duration;
use toml::Spanned;

/// Calls sent at once by a check when the profile does not say.
pub const DEFAULT_CONCURRENCY: usize = 64;
/// Most calls at once.
pub const CONCURRENCY_MAX: usize = 1024;
/// A first call unanswered this long is suspect (then waited for up to `slow_within`).
pub const DEFAULT_HANG_AFTER: Duration = Duration::from_secs(2);
/// A first call unanswered this long hangs.
pub const DEFAULT_SLOW_WITHIN: Duration = Duration::from_secs(10);
/// How long a check's call may take before it counts as unanswered.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The one variable a race check's calls may read: the check's own key.
pub const KEY_VAR: &str = "key";
/// The race checks, in the order they run.
pub const CHECKS: [&str; 4] = [
    "first_call",
    "lost_updates",
    "idempotency",
    "read_your_write",
];

/// The race checks as the profile describes them; a check left out runs with calls of
/// tools found by name on the server, or is skipped.
#[derive(Clone, Debug)]
pub struct RaceChecks {
    /// The checks to run (of [`CHECKS`]); the others are skipped.
    pub only: Vec<String>,
    /// Calls sent at once.
    pub concurrency: usize,
    /// How long a call may take.
    pub timeout: Duration,
    pub lost_updates: Option<LostUpdates>,
    pub idempotency: Option<Idempotency>,
    pub first_call: FirstCall,
    pub read_your_write: Option<ReadYourWrite>,
}

impl Default for RaceChecks {
    fn default() -> Self {
        RaceChecks {
            only: CHECKS.iter().map(|c| c.to_string()).collect(),
            concurrency: DEFAULT_CONCURRENCY,
            timeout: DEFAULT_TIMEOUT,
            lost_updates: None,
            idempotency: None,
            first_call: FirstCall::default(),
            read_your_write: None,
        }
    }
}

/// Lost updates: read, `concurrency` adds at once, read again.
#[derive(Clone, Debug)]
pub struct LostUpdates {
    pub add: Call,
    pub read: Call,
    /// Where the counter's value is in the read's answer (and in an add's, when it says).
    pub value: Path,
    /// What one add adds.
    pub step: i64,
    /// A pause between the last add's answer and the read (for reads that lag writes).
    pub settle: Duration,
}

/// Idempotency: `concurrency` identical calls with one key, then the same key with another
/// input.
#[derive(Clone, Debug)]
pub struct Idempotency {
    pub call: Call,
    /// The same key, another input: must be refused.
    pub changed: Option<Call>,
    /// Where the effect (a payment id, a job id) is in a call's answer.
    pub effect: Path,
    /// A call that reads the effects of the key back, and where their number is in its
    /// answer.
    pub read_back: Option<(Call, Path)>,
}

/// First calls: a fresh session or process, then `concurrency` calls at once.
#[derive(Clone, Debug)]
pub struct FirstCall {
    /// The call (default: the sample call, `echo` or the tool with fewest arguments).
    pub call: Option<Call>,
    pub hang_after: Duration,
    pub slow_within: Duration,
    /// Fresh processes or built-in servers, one burst each (a URL: always 1).
    pub attempts: u32,
}

impl Default for FirstCall {
    fn default() -> Self {
        FirstCall {
            call: None,
            hang_after: DEFAULT_HANG_AFTER,
            slow_within: DEFAULT_SLOW_WITHIN,
            attempts: 1,
        }
    }
}

/// Read-your-write: each of `concurrency` users writes, then reads what it wrote.
#[derive(Clone, Debug)]
pub struct ReadYourWrite {
    pub write: Call,
    /// Where the value written is in the write's answer.
    pub written: Path,
    pub read: Call,
    /// Where the value read is in the read's answer.
    pub value: Path,
}

// ---- as written ----

/// `[races]`: the calls of `mcpload probe --races` (`mcpload run` ignores this table).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RacesTable {
    /// The checks run (default: all).
    #[schemars(with = "Option<Vec<CheckName>>")]
    checks: Option<Spanned<Vec<String>>>,
    /// Calls sent at once by each check (1 to 1024; `--concurrency`).
    #[schemars(with = "Option<usize>", range(min = 1, max = CONCURRENCY_MAX))]
    concurrency: Option<Spanned<usize>>,
    /// The longest a call of `lost_updates`, `idempotency` and `read_your_write` may take.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    timeout: Option<Duration>,
    /// A read, `concurrency` adds at once, a read: every add must show.
    #[schemars(with = "Option<LostUpdatesTable>")]
    lost_updates: Option<Spanned<LostUpdatesTable>>,
    /// `concurrency` identical calls under one key: one effect.
    #[schemars(with = "Option<IdempotencyTable>")]
    idempotency: Option<Spanned<IdempotencyTable>>,
    /// A fresh session or process, then `concurrency` first calls at once.
    #[schemars(with = "Option<FirstCallTable>")]
    first_call: Option<Spanned<FirstCallTable>>,
    /// Each of `concurrency` users writes, then reads what it wrote.
    #[schemars(with = "Option<ReadYourWriteTable>")]
    read_your_write: Option<Spanned<ReadYourWriteTable>>,
}

/// `[races.lost_updates]`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LostUpdatesTable {
    /// The call that adds to the counter of key `{{var.key}}`.
    #[schemars(with = "Call")]
    add: Spanned<Call>,
    /// The call that reads the counter.
    #[schemars(with = "Call")]
    read: Spanned<Call>,
    /// Where the counter is in the read's answer (and an add's), e.g.
    /// `result.structuredContent.value`.
    #[schemars(with = "String")]
    value: Spanned<String>,
    /// What one add adds (default 1).
    step: Option<i64>,
    /// A pause before the second read, for reads that lag writes.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    settle: Option<Duration>,
}

/// `[races.idempotency]`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdempotencyTable {
    /// The call sent `concurrency` times under one key.
    #[schemars(with = "Call")]
    call: Spanned<Call>,
    /// The same key with another input (an accepted conflict when it succeeds).
    #[schemars(with = "Option<Call>")]
    changed: Option<Spanned<Call>>,
    /// Where the effect is in a call's answer, e.g. `result.structuredContent.job_id`.
    #[schemars(with = "String")]
    effect: Spanned<String>,
    /// A call that reads back the effects of the key; with `effects`.
    #[schemars(with = "Option<Call>")]
    read_back: Option<Spanned<Call>>,
    /// Where the number of effects is in the read-back's answer.
    #[schemars(with = "Option<String>")]
    effects: Option<Spanned<String>>,
}

/// `[races.first_call]`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FirstCallTable {
    /// The first call (default: echo, else the tool with the fewest required arguments).
    #[schemars(with = "Option<Call>")]
    call: Option<Spanned<Call>>,
    /// Unanswered by then: waited for up to `slow_within` (`--hang-after`).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    hang_after: Option<Duration>,
    /// Answered by then: slow; else it hangs (`--slow-within`).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    slow_within: Option<Duration>,
    /// stdio and the built-in target: a fresh child or server each (`--attempts`).
    attempts: Option<u32>,
}

/// `[races.read_your_write]`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadYourWriteTable {
    /// Each user's write.
    #[schemars(with = "Call")]
    write: Spanned<Call>,
    /// Where the written value is in the write's answer.
    #[schemars(with = "String")]
    written: Spanned<String>,
    /// The read that follows it.
    #[schemars(with = "Call")]
    read: Spanned<Call>,
    /// Where the value is in the read's answer.
    #[schemars(with = "String")]
    value: Spanned<String>,
}

/// A check's name in `[races].checks`: one of [`CHECKS`].
struct CheckName;

impl JsonSchema for CheckName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RaceCheck".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "enum": CHECKS})
    }
}

// ---- checking ----

/// Checks `[races]` as written.
pub(super) fn check(src: &Source, t: &Spanned<RacesTable>) -> Result<RaceChecks, ProfileError> {
    let c = Checker { src };
    let r = t.get_ref();
    let concurrency = match &r.concurrency {
        None => DEFAULT_CONCURRENCY,
        Some(n) if (1..=CONCURRENCY_MAX).contains(n.get_ref()) => *n.get_ref(),
        Some(n) => {
            return Err(c.error(
                n.span(),
                "races",
                format!("field `concurrency`: must be from 1 to {CONCURRENCY_MAX}"),
            ));
        }
    };
    let only = match &r.checks {
        None => CHECKS.iter().map(|c| c.to_string()).collect(),
        Some(list) => {
            if let Some(bad) = list
                .get_ref()
                .iter()
                .find(|c| !CHECKS.contains(&c.as_str()))
            {
                return Err(c.error(
                    list.span(),
                    "races",
                    format!(
                        "field `checks`: unknown check `{bad}` (checks: {})",
                        CHECKS.join(", ")
                    ),
                ));
            }
            if list.get_ref().is_empty() {
                return Err(c.error(
                    list.span(),
                    "races",
                    format!("field `checks`: name at least one of {}", CHECKS.join(", ")),
                ));
            }
            list.get_ref().clone()
        }
    };
    let timeout = r.timeout.unwrap_or(DEFAULT_TIMEOUT);
    if timeout.is_zero() {
        return Err(c.error(
            t.span(),
            "races",
            "field `timeout`: must be more than 0s".into(),
        ));
    }
    let lost_updates = match &r.lost_updates {
        None => None,
        Some(l) => {
            let w = "races.lost_updates";
            let l = l.get_ref();
            Some(LostUpdates {
                add: c.call(w, "add", &l.add)?,
                read: c.call(w, "read", &l.read)?,
                value: c.path(w, "value", &l.value)?,
                step: l.step.unwrap_or(1),
                settle: l.settle.unwrap_or(Duration::ZERO),
            })
        }
    };
    let idempotency = match &r.idempotency {
        None => None,
        Some(i) => {
            let w = "races.idempotency";
            let (span, i) = (i.span(), i.get_ref());
            let read_back = match (&i.read_back, &i.effects) {
                (Some(call), Some(path)) => {
                    Some((c.call(w, "read_back", call)?, c.path(w, "effects", path)?))
                }
                (None, None) => None,
                _ => {
                    return Err(c.error(
                        span,
                        w,
                        "give `read_back` (a call) and `effects` (where its answer holds the \
                         number of effects) together"
                            .into(),
                    ));
                }
            };
            Some(Idempotency {
                call: c.call(w, "call", &i.call)?,
                changed: i
                    .changed
                    .as_ref()
                    .map(|ch| c.call(w, "changed", ch))
                    .transpose()?,
                effect: c.path(w, "effect", &i.effect)?,
                read_back,
            })
        }
    };
    let mut first_call = FirstCall::default();
    if let Some(f) = &r.first_call {
        let w = "races.first_call";
        let (span, f) = (f.span(), f.get_ref());
        first_call.call = f.call.as_ref().map(|x| c.call(w, "call", x)).transpose()?;
        first_call.hang_after = f.hang_after.unwrap_or(DEFAULT_HANG_AFTER);
        first_call.slow_within = f.slow_within.unwrap_or(DEFAULT_SLOW_WITHIN);
        first_call.attempts = f.attempts.unwrap_or(1);
        if first_call.hang_after.is_zero() || first_call.slow_within <= first_call.hang_after {
            return Err(c.error(
                span,
                w,
                "`hang_after` must be more than 0s and `slow_within` longer than it: a call \
                 unanswered at `hang_after` is waited for until `slow_within`"
                    .into(),
            ));
        }
        if first_call.attempts == 0 {
            return Err(c.error(span, w, "field `attempts`: must be 1 or more".into()));
        }
    }
    let read_your_write = match &r.read_your_write {
        None => None,
        Some(x) => {
            let w = "races.read_your_write";
            let x = x.get_ref();
            Some(ReadYourWrite {
                write: c.call(w, "write", &x.write)?,
                written: c.path(w, "written", &x.written)?,
                read: c.call(w, "read", &x.read)?,
                value: c.path(w, "value", &x.value)?,
            })
        }
    };
    Ok(RaceChecks {
        only,
        concurrency,
        timeout,
        lost_updates,
        idempotency,
        first_call,
        read_your_write,
    })
}

struct Checker<'a> {
    src: &'a Source,
}

impl Checker<'_> {
    fn error(&self, span: Range<usize>, table: &str, message: String) -> ProfileError {
        self.src.error(Some(span), format!("[{table}]: {message}"))
    }

    /// A call: a request method with the fields it needs, placeholders well formed, no
    /// variable but `{{var.key}}`, no CSV column.
    fn call(&self, table: &str, field: &str, c: &Spanned<Call>) -> Result<Call, ProfileError> {
        let (span, call) = (c.span(), c.get_ref());
        let bad = |m: String| Err(self.error(span.clone(), table, format!("`{field}`: {m}")));
        if call.method.trim().is_empty() || call.method.starts_with("notifications/") {
            return bad("`method` must name a request method, e.g. \"tools/call\"".into());
        }
        if call.params.is_none()
            && let Some((needed, example)) = required_field(&call.method)
        {
            let has = match needed {
                "tool" => call.tool.is_some(),
                "uri" => call.uri.is_some(),
                _ => call.prompt.is_some(),
            };
            if !has {
                return bad(format!(
                    "`{}` needs `{needed}` (or `params`), e.g. {example}",
                    call.method
                ));
            }
        }
        let mut texts = Vec::new();
        for table in [&call.args, &call.params].into_iter().flatten() {
            for v in table.values() {
                if let Err(m) = check_templates(v) {
                    return bad(m);
                }
                strings(v, &mut texts);
            }
        }
        texts.extend(call.uri.as_ref().map(|u| u.0.clone()));
        for text in &texts {
            for piece in template::parse(text).unwrap_or_default() {
                match piece {
                    Piece::Hole(Hole::Var(v)) if v != KEY_VAR => {
                        return bad(format!(
                            "`{{{{var.{v}}}}}`: a race check's calls know one variable, \
                             `{{{{var.{KEY_VAR}}}}}` (the check's own fresh key)"
                        ));
                    }
                    Piece::Hole(Hole::Csv(col)) => {
                        return bad(format!(
                            "`{{{{csv:{col}}}}}`: a race check reads no CSV file"
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(call.clone())
    }

    /// A path into an answer (`result.…` or `error.…`).
    fn path(&self, table: &str, field: &str, p: &Spanned<String>) -> Result<Path, ProfileError> {
        let path = Path::parse(p.get_ref()).map_err(|e| {
            self.error(
                p.span(),
                table,
                format!("field `{field}`: {e} in {:?}", p.get_ref()),
            )
        })?;
        if path.var_name().is_some() {
            return Err(self.error(
                p.span(),
                table,
                format!("field `{field}`: a path into the answer starts with `result` or `error`"),
            ));
        }
        Ok(path)
    }
}

/// Every string inside a TOML value.
fn strings(v: &toml::Value, out: &mut Vec<String>) {
    match v {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        toml::Value::Table(t) => t.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::Source;

    fn parse(races: &str) -> Result<super::RaceChecks, String> {
        let src = Source {
            path: "p.toml".into(),
            text: format!("[target]\nbuiltin = {{}}\n\n{races}"),
        };
        src.parse()
            .map(|p| p.races.expect("a [races] table"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_races_table_reads_into_checks() {
        let r = parse(
            r#"
[races]
concurrency = 16
timeout = "3s"
[races.lost_updates]
add = { method = "tools/call", tool = "counter_add", args = { key = "{{var.key}}" } }
read = { method = "tools/call", tool = "counter_read", args = { key = "{{var.key}}" } }
value = "result.structuredContent.value"
[races.idempotency]
call = { method = "tools/call", tool = "job_start", args = { items = 1, request_key = "{{var.key}}" } }
changed = { method = "tools/call", tool = "job_start", args = { items = 2, request_key = "{{var.key}}" } }
effect = "result.structuredContent.job_id"
read_back = { method = "tools/call", tool = "job_lookup", args = { request_key = "{{var.key}}" } }
effects = "result.structuredContent.count"
[races.first_call]
hang_after = "500ms"
slow_within = "5s"
attempts = 3
"#,
        )
        .unwrap();
        assert_eq!(r.concurrency, 16);
        assert_eq!(r.timeout, std::time::Duration::from_secs(3));
        let l = r.lost_updates.unwrap();
        assert_eq!((l.add.label(), l.step), ("counter_add", 1));
        assert_eq!(l.value.to_string(), "result.structuredContent.value");
        let i = r.idempotency.unwrap();
        assert!(i.changed.is_some() && i.read_back.is_some());
        assert_eq!(r.first_call.attempts, 3);
        assert!(r.read_your_write.is_none());
    }

    #[test]
    fn mistakes_are_placed_and_named() {
        for (races, says) in [
            (
                "[races]\nchecks = [\"lost\"]",
                "unknown check `lost` (checks: first_call, lost_updates",
            ),
            ("[races]\nchecks = []", "field `checks`: name at least one"),
            (
                "[races]\nconcurrency = 0",
                "p.toml:5:15: [races]: field `concurrency`: must be from 1 to 1024",
            ),
            (
                "[races.lost_updates]\nadd = { method = \"tools/call\", tool = \"a\", args = { k = \"{{var.n}}\" } }\nread = { method = \"tools/call\", tool = \"r\" }\nvalue = \"result.v\"",
                "know one variable",
            ),
            (
                "[races.lost_updates]\nadd = { method = \"tools/call\" }\nread = { method = \"tools/call\", tool = \"r\" }\nvalue = \"result.v\"",
                "`add`: `tools/call` needs `tool`",
            ),
            (
                "[races.idempotency]\ncall = { method = \"tools/call\", tool = \"a\" }\neffect = \"result.id\"\neffects = \"result.n\"",
                "give `read_back` (a call) and `effects`",
            ),
            (
                "[races.first_call]\nhang_after = \"5s\"\nslow_within = \"1s\"",
                "`slow_within` longer than it",
            ),
            (
                "[races.read_your_write]\nwrite = { method = \"ping\" }\nwritten = \"var.x\"\nread = { method = \"ping\" }\nvalue = \"result.v\"",
                "starts with `result` or `error`",
            ),
        ] {
            let err = parse(races).unwrap_err();
            assert!(err.contains(says), "{races}\n=> {err}");
        }
    }
}
