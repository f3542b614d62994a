//! Scenarios: `[[scenario]]` tables of ordered steps (call, poll, parallel, expect, tally,
//! think) whose answers feed variables to later steps. Read as written, then checked into typed
//! [`Scenario`]s with parsed expressions and paths; every mistake names its place in the file.

use super::expr::{Expr, ExprError, Path, is_identifier};
use super::template::{self, Hole, Piece};
use super::values::{self, TemplateText, parse_duration};
use super::{ProfileError, Source, one, required_field};
use crate::metrics::Defect;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, de};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// A poll's pause between answers when the profile gives none.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// One scenario, checked: each iteration runs its steps in order.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// Relative weight among the scenarios and mix entries (at least 1).
    pub weight: u32,
    /// Rows for `{{csv:COLUMN}}`, one per iteration (path relative to the profile).
    pub csv: Option<PathBuf>,
    pub steps: Vec<Step>,
}

/// One step: a unique name (written, or `<index>-<kind>` counting from 1) and what it does.
#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
}

#[derive(Clone, Debug)]
pub enum StepKind {
    /// One request; its answer may set variables.
    Call { call: Call, captures: Vec<Capture> },
    /// The same request again until a condition holds on an answer.
    Poll(Poll),
    /// Requests sent together; the step ends when all have ended.
    Parallel(Vec<Member>),
    /// Conditions on the variables, each of which must hold.
    Expect(Vec<Expr>),
    /// Counts of defects worked out from the variables, added to the step's correctness
    /// counts (what `expect`, pass or fail, cannot say: how many).
    Tally(Vec<(Defect, Expr)>),
    /// A pause.
    Think(Think),
}

impl StepKind {
    /// `call`, `poll`, `parallel`, `expect`, `tally` or `think`: the step's table key.
    pub fn word(&self) -> &'static str {
        match self {
            StepKind::Call { .. } => "call",
            StepKind::Poll(_) => "poll",
            StepKind::Parallel(_) => "parallel",
            StepKind::Expect(_) => "expect",
            StepKind::Tally(_) => "tally",
            StepKind::Think(_) => "think",
        }
    }
}

/// A request of a step: any JSON-RPC method, with params made from `tool` / `args` (tools/call),
/// `uri` (resources/read), `prompt` / `args` (prompts/get), or given whole in `params`.
/// Strings in `args`, `uri` and `params` may hold placeholders, `{{var.NAME}}` among them.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// Any JSON-RPC request method: `tools/call`, `resources/read`, `prompts/get`,
    /// `tasks/get`, `ping`, ...
    pub method: String,
    /// `tools/call`: the tool's name (one tool, not `"*"`).
    pub tool: Option<String>,
    /// `tools/call` / `prompts/get`: the arguments; strings may hold placeholders.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub args: Option<toml::Table>,
    /// `resources/read`: the resource uri; may hold placeholders.
    pub uri: Option<TemplateText>,
    /// `prompts/get`: the prompt's name.
    pub prompt: Option<String>,
    /// The params object as written, for methods without fields of their own here.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub params: Option<toml::Table>,
}

impl Call {
    /// The tool, prompt or uri it names, else its method.
    pub fn label(&self) -> &str {
        super::label(
            &self.method,
            self.tool.as_deref(),
            self.prompt.as_deref(),
            self.uri.as_ref(),
        )
    }
}

/// A variable set from an answer: `var = "path"`.
#[derive(Clone, Debug)]
pub struct Capture {
    pub var: String,
    /// Displays as written (normalised).
    pub path: Path,
}

/// A poll step: its call, and when it repeats and ends.
#[derive(Clone, Debug)]
pub struct Poll {
    pub call: Call,
    /// Taken from every answer (the last answer's values remain).
    pub captures: Vec<Capture>,
    pub rules: PollRules,
}

/// When a poll repeats and when it ends.
#[derive(Clone, Debug)]
pub struct PollRules {
    /// Checked on each answer; the poll ends when it holds.
    pub until: Expr,
    /// Pause between an answer and the next poll.
    pub interval: Duration,
    /// Follow the answer's `pollInterval` (milliseconds; in `result` or
    /// `result.structuredContent`) in place of `interval` when it gives one.
    pub server_interval: bool,
    /// At most this many requests (at least one of `max_polls` and `max_time` is set).
    pub max_polls: Option<u32>,
    /// At most this long from the first request.
    pub max_time: Option<Duration>,
}

/// One request of a parallel step (or `copies` of it, sent at once).
#[derive(Clone, Debug)]
pub struct Member {
    /// Written, or the call's label; unique within the step.
    pub name: String,
    pub call: Call,
    /// Each capture collects a list, one value per copy in the order the answers came,
    /// when `copies` is above 1.
    pub captures: Vec<Capture>,
    /// Identical requests sent at once (default 1).
    pub copies: u32,
}

/// Most `copies` of a parallel member.
pub const COPIES_MAX: u32 = 1024;

/// A pause.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Think {
    Fixed(Duration),
    /// Uniform in `min..=max`.
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Exponential with this mean.
    Exponential {
        mean: Duration,
    },
}

// ---- as written ----

/// A `[[scenario]]`: a weighted sequence of steps whose answers feed later steps.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioTable {
    /// Names the scenario in reports; unique.
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// Relative weight among the scenarios (and mix entries).
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    weight: u32,
    /// A CSV file (header row, path relative to the profile): one row per iteration feeds
    /// `{{csv:COLUMN}}` in every step.
    csv: Option<PathBuf>,
    /// The steps, in order (at least one).
    #[serde(default)]
    #[schemars(with = "Vec<StepTable>")]
    step: Vec<Spanned<StepTable>>,
}

/// A `[[scenario.step]]`: exactly one of `call`, `poll`, `parallel`, `expect`, `tally`,
/// `think`, with the fields that kind takes.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["call"]}, {"required": ["poll"]}, {"required": ["parallel"]},
    {"required": ["expect"]}, {"required": ["tally"]}, {"required": ["think"]}
]))]
struct StepTable {
    /// Names the step in reports and errors (default: its number and kind); unique.
    name: Option<String>,
    /// Sends one request; `capture` beside it sets variables from the answer.
    #[schemars(with = "Option<MemberTable>")]
    call: Option<Spanned<MemberTable>>,
    /// Sends the request, and again after each answer, until `until` holds on an answer.
    #[schemars(with = "Option<MemberTable>")]
    poll: Option<Spanned<MemberTable>>,
    /// Sends these calls all at once; the step ends when every one has ended.
    #[schemars(with = "Option<Vec<MemberTable>>")]
    parallel: Option<Vec<Spanned<MemberTable>>>,
    /// A condition, or a list of them, each of which must hold on the variables.
    #[schemars(with = "Option<Expects>")]
    expect: Option<Spanned<Expects>>,
    /// `{ COUNT = "EXPR", ... }`: defects counted from the variables (`lost_updates`,
    /// `double_effects`, `accepted_conflicts`, `stale_reads`).
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    tally: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// A pause: `"100ms"`, `{ min = "50ms", max = "150ms" }` (uniform) or
    /// `{ mean = "100ms" }` (exponential).
    #[schemars(with = "Option<ThinkSchema>")]
    think: Option<Spanned<toml::Value>>,
    /// `{ NAME = "PATH", ... }`: variables set from the answer of a `call` or `poll`.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    capture: Option<Captures>,
    /// `poll`: the condition checked on each answer; the poll ends when it holds.
    #[schemars(with = "Option<String>")]
    until: Option<Spanned<String>>,
    /// `poll`: the pause between an answer and the next request (default 1s).
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    interval: Option<Duration>,
    /// `poll`: wait the answer's `pollInterval` (milliseconds) instead of `interval`.
    server_interval: Option<bool>,
    /// `poll`: at most this many requests.
    max_polls: Option<u32>,
    /// `poll`: at most this long from the first request.
    #[serde(default, deserialize_with = "values::optional_duration")]
    #[schemars(schema_with = "values::duration_schema")]
    max_time: Option<Duration>,
}

/// A call as written: `call` and `poll` tables take the call's fields only; a `parallel`
/// member also `name` and `capture`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MemberTable {
    /// A `parallel` member: its name (default: its tool, prompt, uri or method); unique
    /// within the step.
    name: Option<String>,
    /// Any JSON-RPC request method: `tools/call`, `resources/read`, `prompts/get`,
    /// `tasks/get`, `ping`, ...
    method: String,
    /// `tools/call`: the tool's name (one tool, not `"*"`).
    tool: Option<String>,
    /// `tools/call` / `prompts/get`: the arguments; strings may hold placeholders.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    args: Option<toml::Table>,
    /// `resources/read`: the resource uri; may hold placeholders.
    uri: Option<TemplateText>,
    /// `prompts/get`: the prompt's name.
    prompt: Option<String>,
    /// The params object sent as it is (for any method; not with `tool`, `args`, `uri`,
    /// `prompt`).
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    params: Option<toml::Table>,
    /// A `parallel` member: `{ NAME = "PATH", ... }`, variables set from its answer.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    capture: Option<Captures>,
    /// A `parallel` member: this many identical requests at once (1 to 1024), each capture
    /// then a list of their values.
    #[schemars(with = "Option<u32>", range(min = 1, max = COPIES_MAX))]
    copies: Option<Spanned<u32>>,
}

type Captures = BTreeMap<String, Spanned<String>>;

/// `expect`: one condition or a list of them.
#[derive(Clone, Debug)]
enum Expects {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl JsonSchema for Expects {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expects".into()
    }

    /// What [`Expects::deserialize`] reads: a condition, or a list of them, as text.
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
        })
    }
}

/// The schema of `think` as [`Checker::think`] reads it.
struct ThinkSchema;

impl JsonSchema for ThinkSchema {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Think".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let duration = values::duration_schema(generator);
        let described = |what: &str| {
            let mut d = duration.clone();
            d.insert("description".into(), what.into());
            d
        };
        json_schema!({
            "oneOf": [
                duration,
                {
                    "type": "object",
                    "properties": {
                        "min": described("The shortest pause (uniform between min and max)."),
                        "max": described("The longest pause."),
                    },
                    "required": ["min", "max"],
                    "additionalProperties": false,
                },
                {
                    "type": "object",
                    "properties": {
                        "mean": described("The mean of exponentially distributed pauses."),
                    },
                    "required": ["mean"],
                    "additionalProperties": false,
                },
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Expects {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> de::Visitor<'de> for Visit {
            type Value = Expects;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a condition, or a list of conditions, as text")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Expects, E> {
                Ok(Expects::One(v.to_owned()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Expects, A::Error> {
                let mut out = Vec::new();
                while let Some(s) = seq.next_element()? {
                    out.push(s);
                }
                Ok(Expects::Many(out))
            }
        }
        d.deserialize_any(Visit)
    }
}

// ---- checking ----

/// Checks the scenarios as written into typed ones.
pub(super) fn check(
    src: &Source,
    tables: &[Spanned<ScenarioTable>],
) -> Result<Vec<Scenario>, ProfileError> {
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for t in tables {
        let s = t.get_ref();
        let name = s.name.get_ref();
        if name.trim().is_empty() {
            return Err(src.error(
                Some(s.name.span()),
                "field `scenario.name`: must not be empty".into(),
            ));
        }
        if !names.insert(name.clone()) {
            return Err(src.error(
                Some(s.name.span()),
                format!("field `scenario.name`: two scenarios are named `{name}`"),
            ));
        }
        let at = |span: Range<usize>, message: String| {
            src.error(Some(span), format!("scenario `{name}`, {message}"))
        };
        if s.weight == 0 {
            return Err(at(t.span(), "field `weight`: must be 1 or more".into()));
        }
        if s.step.is_empty() {
            return Err(at(
                t.span(),
                "no steps: add [[scenario.step]] tables, e.g. call = { method = \"tools/call\", tool = \"echo\" }".into(),
            ));
        }
        let mut c = Checker {
            src,
            scenario: name,
            has_csv: s.csv.is_some(),
            captured: BTreeSet::new(),
        };
        let mut steps: Vec<Step> = Vec::new();
        for (i, st) in s.step.iter().enumerate() {
            let step = c.step(i, st)?;
            if steps.iter().any(|s| s.name == step.name) {
                return Err(at(
                    st.span(),
                    format!("two steps are named `{}`", step.name),
                ));
            }
            steps.push(step);
        }
        out.push(Scenario {
            name: name.clone(),
            weight: s.weight,
            csv: s.csv.clone(),
            steps,
        });
    }
    Ok(out)
}

/// Checks one scenario's steps in order, knowing which variables earlier steps capture.
struct Checker<'a> {
    src: &'a Source,
    scenario: &'a str,
    has_csv: bool,
    captured: BTreeSet<String>,
}

impl Checker<'_> {
    fn error(&self, span: Range<usize>, step: &str, message: String) -> ProfileError {
        self.src.error(
            Some(span),
            format!("scenario `{}`, step `{step}`: {message}", self.scenario),
        )
    }

    fn step(&mut self, index: usize, st: &Spanned<StepTable>) -> Result<Step, ProfileError> {
        let t = st.get_ref();
        let span = st.span();
        let kinds = [
            ("call", t.call.is_some()),
            ("poll", t.poll.is_some()),
            ("parallel", t.parallel.is_some()),
            ("expect", t.expect.is_some()),
            ("tally", t.tally.is_some()),
            ("think", t.think.is_some()),
        ];
        let given: Vec<&str> = kinds.iter().filter(|k| k.1).map(|k| k.0).collect();
        let provisional = t.name.clone().unwrap_or_else(|| format!("{}", index + 1));
        let word = match given[..] {
            [one] => one,
            _ => {
                let found = if given.is_empty() {
                    "none".to_owned()
                } else {
                    given.join(" and ")
                };
                return Err(self.error(
                    span,
                    &provisional,
                    format!(
                        "give exactly one of `call`, `poll`, `parallel`, `expect`, `tally`, `think` (found {found})"
                    ),
                ));
            }
        };
        let name = t
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{word}", index + 1));
        if name.trim().is_empty() {
            return Err(self.error(span, &name, "field `name`: must not be empty".into()));
        }
        let poll_only = [
            ("until", t.until.is_some()),
            ("interval", t.interval.is_some()),
            ("server_interval", t.server_interval.is_some()),
            ("max_polls", t.max_polls.is_some()),
            ("max_time", t.max_time.is_some()),
        ];
        if word != "poll"
            && let Some((field, _)) = poll_only.iter().find(|f| f.1)
        {
            return Err(self.error(
                span,
                &name,
                format!("field `{field}` belongs to a `poll` step, not a `{word}` step"),
            ));
        }
        if t.capture.is_some() && !matches!(word, "call" | "poll") {
            return Err(self.error(
                span,
                &name,
                format!(
                    "field `capture` belongs to a `call` or `poll` step (or a `parallel` member), not a `{word}` step"
                ),
            ));
        }
        let kind = match word {
            "call" | "poll" => {
                let table = t.call.as_ref().or(t.poll.as_ref()).expect("one of them");
                let call = self.call(&name, word, table)?;
                self.reads_templates(&name, table.span(), &call, None)?;
                let captures = self.captures(&name, t.capture.as_ref())?;
                if word == "call" {
                    self.captured.extend(captures.iter().map(|c| c.var.clone()));
                    StepKind::Call { call, captures }
                } else {
                    let poll = self.poll(&name, span, t, call, captures)?;
                    self.captured
                        .extend(poll.captures.iter().map(|c| c.var.clone()));
                    StepKind::Poll(poll)
                }
            }
            "parallel" => StepKind::Parallel(self.parallel(
                &name,
                span,
                t.parallel.as_deref().unwrap_or_default(),
            )?),
            "expect" => {
                let e = t.expect.as_ref().expect("given");
                let texts: Vec<(&str, Range<usize>)> = match e.get_ref() {
                    Expects::One(s) => vec![(s.as_str(), e.span())],
                    Expects::Many(v) => {
                        v.iter().map(|s| (s.get_ref().as_str(), s.span())).collect()
                    }
                };
                if texts.is_empty() {
                    return Err(self.error(
                        e.span(),
                        &name,
                        "field `expect`: give at least one condition".into(),
                    ));
                }
                let mut exprs = Vec::new();
                for (text, span) in texts {
                    exprs.push(self.expr(&name, "expect", text, span)?);
                }
                StepKind::Expect(exprs)
            }
            "tally" => StepKind::Tally(self.tally(&name, t.tally.as_ref().expect("given"))?),
            _ => StepKind::Think(self.think(&name, t.think.as_ref().expect("given"))?),
        };
        Ok(Step { name, kind })
    }

    /// `tally = { lost_updates = "EXPR", ... }`: each key a defect a scenario may count,
    /// each expression reading earlier captures.
    fn tally(
        &self,
        name: &str,
        t: &Spanned<BTreeMap<String, Spanned<String>>>,
    ) -> Result<Vec<(Defect, Expr)>, ProfileError> {
        let counts: Vec<&str> = Defect::TALLIED.iter().map(|d| d.name()).collect();
        if t.get_ref().is_empty() {
            return Err(self.error(
                t.span(),
                name,
                format!(
                    "field `tally`: give at least one count ({}), e.g. tally = {{ lost_updates = \"64 - (var.after - var.before)\" }}",
                    counts.join(", ")
                ),
            ));
        }
        let mut out = Vec::new();
        for (key, text) in t.get_ref() {
            let Some(defect) = Defect::named(key).filter(|d| Defect::TALLIED.contains(d)) else {
                return Err(self.error(
                    text.span(),
                    name,
                    format!(
                        "field `tally`: unknown count `{key}` (counts: {})",
                        counts.join(", ")
                    ),
                ));
            };
            out.push((
                defect,
                self.expr(name, "tally", text.get_ref(), text.span())?,
            ));
        }
        Ok(out)
    }

    fn poll(
        &self,
        name: &str,
        span: Range<usize>,
        t: &StepTable,
        call: Call,
        captures: Vec<Capture>,
    ) -> Result<Poll, ProfileError> {
        let Some(until) = &t.until else {
            return Err(self.error(
                span,
                name,
                "a `poll` step needs `until`, e.g. until = \"result.structuredContent.state == 'done'\"".into(),
            ));
        };
        let until = self.expr(name, "until", until.get_ref(), until.span())?;
        if t.max_polls.is_none() && t.max_time.is_none() {
            return Err(self.error(
                span,
                name,
                "a `poll` step needs `max_polls` or `max_time` (or both), so that it ends".into(),
            ));
        }
        let bounds = [
            ("max_polls", t.max_polls == Some(0)),
            ("max_time", t.max_time.is_some_and(|d| d.is_zero())),
            ("interval", t.interval.is_some_and(|d| d.is_zero())),
        ];
        if let Some((field, _)) = bounds.iter().find(|b| b.1) {
            return Err(self.error(span, name, format!("field `{field}`: must be more than 0")));
        }
        Ok(Poll {
            call,
            captures,
            rules: PollRules {
                until,
                interval: t.interval.unwrap_or(DEFAULT_POLL_INTERVAL),
                server_interval: t.server_interval.unwrap_or(false),
                max_polls: t.max_polls,
                max_time: t.max_time,
            },
        })
    }

    fn parallel(
        &mut self,
        name: &str,
        span: Range<usize>,
        tables: &[Spanned<MemberTable>],
    ) -> Result<Vec<Member>, ProfileError> {
        if tables.is_empty() {
            return Err(self.error(
                span,
                name,
                "field `parallel`: give at least one call".into(),
            ));
        }
        let mut members: Vec<Member> = Vec::new();
        let mut siblings = BTreeMap::new();
        for m in tables {
            let call = self.call(name, "parallel", m)?;
            let captures = self.captures(name, m.get_ref().capture.as_ref())?;
            let member = m
                .get_ref()
                .name
                .clone()
                .unwrap_or_else(|| call.label().to_owned());
            if members.iter().any(|o| o.name == member) {
                return Err(self.error(
                    m.span(),
                    name,
                    format!(
                        "two `parallel` members are named `{member}`; give each its own `name`"
                    ),
                ));
            }
            for c in &captures {
                siblings.insert(c.var.clone(), member.clone());
            }
            let copies = match &m.get_ref().copies {
                None => 1,
                Some(n) if (1..=COPIES_MAX).contains(n.get_ref()) => *n.get_ref(),
                Some(n) => {
                    return Err(self.error(
                        n.span(),
                        name,
                        format!(
                            "member `{member}`: field `copies`: must be from 1 to {COPIES_MAX}"
                        ),
                    ));
                }
            };
            members.push(Member {
                name: member,
                call,
                captures,
                copies,
            });
        }
        for (m, table) in members.iter().zip(tables) {
            self.reads_templates(name, table.span(), &m.call, Some(&siblings))?;
        }
        for m in &members {
            self.captured
                .extend(m.captures.iter().map(|c| c.var.clone()));
        }
        Ok(members)
    }

    /// A call's fields: the method's own field present (or `params`), no field that belongs to
    /// another method.
    fn call(&self, step: &str, word: &str, t: &Spanned<MemberTable>) -> Result<Call, ProfileError> {
        let m = t.get_ref();
        let bad = |message: String| Err(self.error(t.span(), step, format!("`{word}`: {message}")));
        if word != "parallel" {
            if m.name.is_some() {
                return bad("`name` belongs to the step (or to a `parallel` member)".into());
            }
            if m.copies.is_some() {
                return bad("`copies` belongs to a `parallel` member".into());
            }
            if m.capture.is_some() {
                return bad(
                    "write `capture` beside `call` / `poll` in the step, not inside it".into(),
                );
            }
        }
        let method = m.method.as_str();
        if method.trim().is_empty() {
            return bad("field `method`: must not be empty".into());
        }
        if method.starts_with("notifications/") {
            return bad(format!(
                "`{method}` is a notification, which gets no answer; a step sends requests"
            ));
        }
        let fields = [
            ("tool", m.tool.is_some(), "tools/call"),
            ("uri", m.uri.is_some(), "resources/read"),
            ("prompt", m.prompt.is_some(), "prompts/get"),
        ];
        if m.params.is_some() {
            if let Some((field, ..)) = fields.iter().find(|f| f.1) {
                return bad(format!("give `params` or `{field}`, not both"));
            }
            if m.args.is_some() {
                return bad("give `params` or `args`, not both".into());
            }
        } else {
            if let Some((field, example)) = required_field(method)
                && !fields.iter().any(|f| f.0 == field && f.1)
            {
                return bad(format!(
                    "`{method}` needs `{field}` (or `params`), e.g. {example}"
                ));
            }
            if let Some((field, _, owner)) = fields.iter().find(|f| f.1 && f.2 != method) {
                return bad(format!(
                    "field `{field}` is for `{owner}`, not `{method}`; other methods take `params`"
                ));
            }
            if m.args.is_some() && !matches!(method, "tools/call" | "prompts/get") {
                return bad(format!(
                    "field `args` is for `tools/call` and `prompts/get`, not `{method}`; other methods take `params`"
                ));
            }
        }
        if m.tool.as_deref() == Some("*") {
            return bad("`tool = \"*\"` is for a mix; a step calls one tool".into());
        }
        for (field, table) in [("args", &m.args), ("params", &m.params)] {
            if let Some(table) = table {
                table
                    .values()
                    .try_for_each(values::check_templates)
                    .map_err(|e| self.error(t.span(), step, format!("field `{field}`: {e}")))?;
            }
        }
        Ok(Call {
            method: m.method.clone(),
            tool: m.tool.clone(),
            args: m.args.clone(),
            uri: m.uri.clone(),
            prompt: m.prompt.clone(),
            params: m.params.clone(),
        })
    }

    /// The placeholders of a call: `{{csv:…}}` needs the scenario's `csv`; `{{var.X}}` needs an
    /// earlier capture of X (a `parallel` sibling's does not count: it runs at the same time).
    fn reads_templates(
        &self,
        step: &str,
        span: Range<usize>,
        call: &Call,
        siblings: Option<&BTreeMap<String, String>>,
    ) -> Result<(), ProfileError> {
        let mut texts = Vec::new();
        for table in [&call.args, &call.params].into_iter().flatten() {
            table.values().for_each(|v| strings(v, &mut texts));
        }
        texts.extend(call.uri.as_ref().map(|u| u.0.as_str()));
        for text in texts {
            for piece in template::parse(text).unwrap_or_default() {
                match piece {
                    Piece::Hole(Hole::Csv(col)) if !self.has_csv => {
                        return Err(self.error(
                            span,
                            step,
                            format!(
                                "`{{{{csv:{col}}}}}` needs `csv = \"file.csv\"` in the scenario"
                            ),
                        ));
                    }
                    Piece::Hole(Hole::Var(var)) => {
                        self.read(
                            span.clone(),
                            step,
                            &format!("{{{{var.{var}}}}}"),
                            &var,
                            siblings,
                        )?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// A variable read must follow its capture.
    fn read(
        &self,
        span: Range<usize>,
        step: &str,
        written: &str,
        var: &str,
        siblings: Option<&BTreeMap<String, String>>,
    ) -> Result<(), ProfileError> {
        if self.captured.contains(var) {
            return Ok(());
        }
        let why = match siblings.and_then(|s| s.get(var)) {
            Some(member) => format!(
                "`{var}` is captured by `{member}` in the same `parallel` step, which runs at the same time; read it in a later step"
            ),
            None => format!(
                "no earlier step captures `{var}` (capture = {{ {var} = \"result.…\" }} in an earlier `call` or `poll`)"
            ),
        };
        Err(self.error(
            span,
            step,
            format!("`{written}` is read before it is set: {why}"),
        ))
    }

    fn captures(
        &self,
        step: &str,
        captures: Option<&Captures>,
    ) -> Result<Vec<Capture>, ProfileError> {
        let mut out = Vec::new();
        for (var, text) in captures.into_iter().flatten() {
            if !is_identifier(var) {
                return Err(self.error(
                    text.span(),
                    step,
                    format!("field `capture`: `{var}` is not a variable name (letters, digits and _, not starting with a digit)"),
                ));
            }
            let path = Path::parse(text.get_ref())
                .map_err(|e| self.expr_error(step, "capture", text.get_ref(), text.span(), e))?;
            if let Some(v) = path.var_name() {
                self.read(text.span(), step, &format!("var.{v}"), v, None)?;
            }
            out.push(Capture {
                var: var.clone(),
                path,
            });
        }
        Ok(out)
    }

    /// Parses an expression of field `field`; its variables must be captured already.
    fn expr(
        &self,
        step: &str,
        field: &str,
        text: &str,
        span: Range<usize>,
    ) -> Result<Expr, ProfileError> {
        let e =
            Expr::parse(text).map_err(|e| self.expr_error(step, field, text, span.clone(), e))?;
        for var in e.var_names() {
            self.read(span.clone(), step, &format!("var.{var}"), var, None)?;
        }
        Ok(e)
    }

    /// An expression's mistake, placed at its column inside the string in the file.
    fn expr_error(
        &self,
        step: &str,
        field: &str,
        text: &str,
        span: Range<usize>,
        e: ExprError,
    ) -> ProfileError {
        let at = inside_string(&self.src.text, span, text, e.column);
        self.error(at..at, step, format!("field `{field}`: {}", e.message))
    }

    fn think(&self, step: &str, v: &Spanned<toml::Value>) -> Result<Think, ProfileError> {
        let bad = |m: String| self.error(v.span(), step, format!("field `think`: {m}"));
        let how = "write a duration (\"100ms\"), { min = \"50ms\", max = \"150ms\" } (uniform) or { mean = \"100ms\" } (exponential)";
        let duration = |v: Option<&toml::Value>| match v.and_then(toml::Value::as_str) {
            Some(s) => parse_duration(s).map_err(&bad),
            None => Err(bad(how.into())),
        };
        match v.get_ref() {
            toml::Value::String(s) => Ok(Think::Fixed(parse_duration(s).map_err(&bad)?)),
            toml::Value::Table(t) => {
                let mut keys: Vec<&str> = t.keys().map(String::as_str).collect();
                keys.sort_unstable();
                match keys[..] {
                    ["max", "min"] => {
                        let (min, max) = (duration(t.get("min"))?, duration(t.get("max"))?);
                        if min > max {
                            return Err(bad("`min` is more than `max`".into()));
                        }
                        Ok(Think::Uniform { min, max })
                    }
                    ["mean"] => {
                        let mean = duration(t.get("mean"))?;
                        if mean.is_zero() {
                            return Err(bad("`mean` must be more than 0s".into()));
                        }
                        Ok(Think::Exponential { mean })
                    }
                    _ => Err(bad(how.into())),
                }
            }
            _ => Err(bad(how.into())),
        }
    }
}

/// Every string in a TOML value.
fn strings<'a>(v: &'a toml::Value, out: &mut Vec<&'a str>) {
    match v {
        toml::Value::String(s) => out.push(s),
        toml::Value::Array(a) => a.iter().for_each(|i| strings(i, out)),
        toml::Value::Table(t) => t.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

/// The byte offset in `text` of the character at `column` (1-based) of the string `value`
/// written at `span`: exact when the string is written as it reads (no escapes), else the
/// string's start.
fn inside_string(text: &str, span: Range<usize>, value: &str, column: usize) -> usize {
    let raw = text.get(span.clone()).unwrap_or("");
    let quote = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
        3
    } else if raw.starts_with('"') || raw.starts_with('\'') {
        1
    } else {
        return span.start;
    };
    if !raw[quote..].starts_with(value) {
        return span.start;
    }
    let byte = value
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(value.len(), |(b, _)| b);
    span.start + quote + byte
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    fn parse(body: &str) -> Result<Profile, ProfileError> {
        Source {
            path: "s.toml".into(),
            text: format!("[target]\nbuiltin = {{}}\n{body}"),
        }
        .parse()
    }

    /// The error's text, `s.toml:LINE:COL: message`.
    fn error(body: &str) -> String {
        parse(body).expect_err("must fail").to_string()
    }

    const JOBS: &str = r#"
[load]
graceful_stop = "5s"

[[mix]]
name = "search"
method = "tools/call"
tool = "echo"

[[scenario]]
name = "jobs"
csv = "rows.csv"

  [[scenario.step]]
  name = "start"
  call = { method = "tools/call", tool = "job_start", args = { items = "{{csv:n}}", request_key = "{{uuid}}" } }
  capture = { job_id = "result.structuredContent.job_id" }

  [[scenario.step]]
  name = "wait"
  poll = { method = "tools/call", tool = "job_status", args = { job_id = "{{var.job_id}}" } }
  until = "result.structuredContent.state in ['succeeded','partial','failed']"
  interval = "200ms"
  server_interval = true
  max_polls = 100
  max_time = "30s"
  capture = { state = "result.structuredContent.state", succeeded = "result.structuredContent.succeeded", failed = "result.structuredContent.failed" }

  [[scenario.step]]
  name = "both"
  parallel = [
    { name = "echo", method = "tools/call", tool = "echo", args = { message = "{{var.state}}" } },
    { method = "resources/read", uri = "mcpload://static/{{var.job_id}}", capture = { text = "result.contents[0].text" } },
    { method = "tasks/get", params = { taskId = "{{var.job_id}}" } },
  ]

  [[scenario.step]]
  expect = ["var.succeeded + var.failed == 20", "var.state != 'failed'"]

  [[scenario.step]]
  think = { min = "50ms", max = "150ms" }

[[scenario]]
name = "ping"
weight = 3
step = [{ call = { method = "ping" } }, { think = "100ms" }, { think = { mean = "1s" } }]
"#;

    #[test]
    fn a_whole_scenario_reads_into_typed_steps() {
        let p = parse(JOBS).unwrap();
        assert_eq!(p.load.graceful_stop_or_timeout(), Duration::from_secs(5));
        assert_eq!(p.mix[0].get_ref().name(), "search");
        let [jobs, ping] = &p.scenarios[..] else {
            panic!("{:?}", p.scenarios)
        };
        assert_eq!((jobs.weight, ping.weight), (1, 3));
        assert_eq!(jobs.csv.as_deref(), Some(std::path::Path::new("rows.csv")));
        let names: Vec<&str> = jobs.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["start", "wait", "both", "4-expect", "5-think"]);
        let StepKind::Call { call, captures } = &jobs.steps[0].kind else {
            panic!()
        };
        assert_eq!(call.label(), "job_start");
        assert_eq!(captures[0].var, "job_id");
        assert_eq!(
            captures[0].path.to_string(),
            "result.structuredContent.job_id"
        );
        let StepKind::Poll(poll) = &jobs.steps[1].kind else {
            panic!()
        };
        let rules = &poll.rules;
        assert_eq!(rules.interval, Duration::from_millis(200));
        assert!(rules.server_interval);
        assert_eq!(
            (rules.max_polls, rules.max_time),
            (Some(100), Some(Duration::from_secs(30)))
        );
        assert!(
            rules
                .until
                .source()
                .starts_with("result.structuredContent.state in")
        );
        assert_eq!(poll.captures.len(), 3);
        let StepKind::Parallel(members) = &jobs.steps[2].kind else {
            panic!()
        };
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["echo", "mcpload://static/{{var.job_id}}", "tasks/get"]
        );
        assert_eq!(
            members[2].call.params.as_ref().unwrap()["taskId"].as_str(),
            Some("{{var.job_id}}")
        );
        let StepKind::Expect(exprs) = &jobs.steps[3].kind else {
            panic!()
        };
        assert_eq!(exprs[1].source(), "var.state != 'failed'");
        assert!(matches!(
            jobs.steps[4].kind,
            StepKind::Think(Think::Uniform { .. })
        ));
        let kinds: Vec<&str> = ping.steps.iter().map(|s| s.kind.word()).collect();
        assert_eq!(kinds, ["call", "think", "think"]);
        assert!(matches!(
            ping.steps[2].kind,
            StepKind::Think(Think::Exponential { .. })
        ));
        // Without a graceful_stop, the timeout.
        assert_eq!(
            parse("").unwrap().load.graceful_stop_or_timeout(),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn copies_and_tallies_read_into_steps() {
        let p = parse(
            r#"
[[scenario]]
name = "c"
  [[scenario.step]]
  call = { method = "tools/call", tool = "counter_read" }
  capture = { before = "result.structuredContent.value" }
  [[scenario.step]]
  parallel = [{ name = "add", method = "tools/call", tool = "counter_add", copies = 16, capture = { got = "result.structuredContent.value" } }]
  [[scenario.step]]
  tally = { lost_updates = "16 - len(var.got)", stale_reads = "var.before != 0" }
"#,
        )
        .unwrap();
        let steps = &p.scenarios[0].steps;
        let StepKind::Parallel(members) = &steps[1].kind else {
            panic!()
        };
        assert_eq!((members[0].name.as_str(), members[0].copies), ("add", 16));
        let StepKind::Tally(counts) = &steps[2].kind else {
            panic!()
        };
        let read: Vec<(Defect, &str)> = counts.iter().map(|(d, e)| (*d, e.source())).collect();
        assert_eq!(
            read,
            [
                (Defect::LostUpdates, "16 - len(var.got)"),
                (Defect::StaleReads, "var.before != 0")
            ]
        );
        assert_eq!(steps[2].name, "3-tally");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nparallel = [{ method = \"ping\", copies = 0 }]\n",
        );
        assert!(e.contains("field `copies`: must be from 1 to 1024"), "{e}");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\ntally = { first_call_hangs = \"1\" }\n",
        );
        assert!(e.contains("unknown count `first_call_hangs`"), "{e}");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\ntally = { lost_updates = \"var.n\" }\n",
        );
        assert!(e.contains("`var.n` is read before it is set"), "{e}");
    }

    #[test]
    fn a_bad_expression_points_into_its_string() {
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nexpect = [\"1 == 1\", \"var.x = 2\"]\n",
        );
        // Line 6; the string opens at column 21, `=` is its 7th character.
        assert!(
            e.starts_with("s.toml:6:28: scenario `a`, step `1-expect`: field `expect`:"),
            "{e}"
        );
        assert!(e.contains("compare with =="), "{e}");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\ncall = { method = \"ping\" }\ncapture = { v = \"result.x[\" }\n",
        );
        assert!(e.starts_with("s.toml:7:27: "), "{e}");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npoll = { method = \"ping\" }\nuntil = 'result.x == nope'\nmax_polls = 2\n",
        );
        assert!(e.starts_with("s.toml:7:22: "), "{e}");
        assert!(e.contains("unknown name `nope`"), "{e}");
    }

    #[test]
    fn a_variable_must_be_captured_before_it_is_read() {
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"go\"\ncall = { method = \"tools/call\", tool = \"t\", args = { id = \"{{var.job}}\" } }\n",
        );
        assert!(e.starts_with("s.toml:7:8: scenario `a`, step `go`:"), "{e}");
        assert!(
            e.contains("`{{var.job}}` is read before it is set: no earlier step captures `job`"),
            "{e}"
        );
        let e = error("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nexpect = \"var.n > 1\"\n");
        assert!(e.contains("`var.n` is read before it is set"), "{e}");
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nparallel = [{ name = \"p\", method = \"ping\", capture = { x = \"result\" } }, { method = \"tasks/get\", params = { id = \"{{var.x}}\" } }]\n",
        );
        assert!(
            e.contains("`x` is captured by `p` in the same `parallel` step"),
            "{e}"
        );
        // Captured earlier: fine; a poll's `until` may read earlier captures.
        parse(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\ncall = { method = \"ping\" }\ncapture = { x = \"result\" }\n[[scenario.step]]\npoll = { method = \"tasks/get\", params = { id = \"{{var.x}}\" } }\nuntil = \"var.x == result\"\nmax_time = \"1s\"\n",
        )
        .unwrap();
    }

    #[test]
    fn each_step_does_exactly_one_thing() {
        let e = error(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\ncall = { method = \"ping\" }\nthink = \"1s\"\n",
        );
        assert!(
            e.starts_with("s.toml:5:1: scenario `a`, step `1`: give exactly one of"),
            "{e}"
        );
        assert!(e.contains("found call and think"), "{e}");
        let wants = [
            ("[[scenario.step]]\n", "found none"),
            (
                "[[scenario.step]]\nthink = \"1s\"\nuntil = \"true\"\n",
                "`until` belongs to a `poll` step",
            ),
            (
                "[[scenario.step]]\nexpect = \"true\"\ncapture = { a = \"result\" }\n",
                "`capture` belongs to a `call`",
            ),
            (
                "[[scenario.step]]\npoll = { method = \"ping\" }\nmax_polls = 3\n",
                "needs `until`",
            ),
            (
                "[[scenario.step]]\npoll = { method = \"ping\" }\nuntil = \"true\"\n",
                "`max_polls` or `max_time`",
            ),
            (
                "[[scenario.step]]\npoll = { method = \"ping\" }\nuntil = \"true\"\nmax_polls = 0\n",
                "`max_polls`: must be more than 0",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"tools/call\" }\n",
                "`tools/call` needs `tool`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\", tool = \"x\" }\n",
                "`tool` is for `tools/call`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\", args = {} }\n",
                "`args` is for",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"tools/call\", tool = \"x\", params = {} }\n",
                "`params` or `tool`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"tools/call\", tool = \"*\" }\n",
                "for a mix",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"notifications/cancelled\" }\n",
                "gets no answer",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\", name = \"x\" }\n",
                "`name` belongs to the step",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\", capture = {} }\n",
                "beside `call`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\", bogus = 1 }\n",
                "unknown field `bogus`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"tools/call\", tool = \"t\", args = { a = \"{{csv:c}}\" } }\n",
                "needs `csv = \"file.csv\"`",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"ping\" }\ncapture = { 1x = \"result\" }\n",
                "not a variable name",
            ),
            (
                "[[scenario.step]]\ncall = { method = \"tools/call\", tool = \"t\", args = { a = \"{{var.}}\" } }\n",
                "{{var.NAME}}",
            ),
            (
                "[[scenario.step]]\nthink = { min = \"2s\", max = \"1s\" }\n",
                "`min` is more than `max`",
            ),
            (
                "[[scenario.step]]\nthink = { mean = \"1s\", max = \"1s\" }\n",
                "(exponential)",
            ),
            ("[[scenario.step]]\nthink = 5\n", "write a duration"),
            ("[[scenario.step]]\nexpect = []\n", "at least one condition"),
            ("[[scenario.step]]\nparallel = []\n", "at least one call"),
            (
                "[[scenario.step]]\nparallel = [{ method = \"ping\" }, { method = \"ping\" }]\n",
                "two `parallel` members are named `ping`",
            ),
            (
                "[[scenario.step]]\nname = \"x\"\nthink = \"1s\"\n[[scenario.step]]\nname = \"x\"\nthink = \"1s\"\n",
                "two steps are named `x`",
            ),
            (
                "weight = 0\n[[scenario.step]]\nthink = \"1s\"\n",
                "`weight`: must be 1 or more",
            ),
            ("", "no steps"),
        ];
        for (steps, want) in wants {
            let e = error(&format!("[[scenario]]\nname = \"a\"\n{steps}"));
            assert!(e.contains(want), "{steps}: {want:?} not in {e}");
            assert!(e.starts_with("s.toml:"), "{e}");
        }
    }

    #[test]
    fn scenarios_have_unique_names_and_take_no_batch() {
        let one = "[[scenario]]\nname = \"a\"\nstep = [{ think = \"1s\" }]\n";
        let e = error(&format!("{one}{one}"));
        assert!(
            e.starts_with("s.toml:7:8: field `scenario.name`: two scenarios are named `a`"),
            "{e}"
        );
        let e = error(&format!("[batch]\nsize = 2\n{one}"));
        assert!(
            e.starts_with("s.toml:3:1: field `batch`: a batch is drawn from the mix"),
            "{e}"
        );
    }
}
