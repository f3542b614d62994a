//! The text `init` writes: the `[target]` table without a secret in it, each tool placed by
//! its annotations and probe with the reason as a comment, the sweep and gates from the
//! calibration, and the short profiles of the probe and calibration runs themselves (the
//! same entries, so that what was probed is what the profile loads).

use super::{InitError, InitOptions, InitTarget, Listing, arguments, check_text, kept};
use crate::client::{ProtocolChoice, ToolInfo};
use crate::report::RunSummary;
use crate::server::ServeConfig;
use serde_json::Value;
use std::fmt::Write;
use std::time::Duration;

/// A variable the profile reads, and what it must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub what: String,
}

/// Where a tool's annotations, name and description put it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// In the mix, once its probe passes.
    Load { why: String },
    /// Commented out with a warning: it changes data. Never called by `init`.
    Write { why: String },
    /// Never called: its `x-mcp-header` annotations are invalid.
    Invalid { why: String },
}

/// What a probe saw of a tool that passed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Probed {
    pub calls: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The server asked for input during its calls (answered from `[input]`).
    pub input_rounds: bool,
}

impl Probed {
    /// The entry's timeout: ten times the slowest call seen, at least 1 s, rounded up to 1,
    /// 2 or 5 of a power of ten.
    pub fn timeout(&self) -> Duration {
        nice_ceiling_ms((self.max_ms * 10.0).max(1000.0))
    }
}

/// One tool as `init` placed and probed it.
#[derive(Clone, Debug)]
pub struct ToolEntry {
    pub info: ToolInfo,
    pub placed: Placed,
    /// Called as a task: the server lists it `taskSupport: required`, or refused it until
    /// the call declared the tasks extension.
    pub task: bool,
    /// The probe's outcome (`None`: not probed, a write or invalid); `Err` says why the
    /// tool is left out.
    pub probe: Option<Result<Probed, String>>,
}

impl ToolEntry {
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Whether the profile loads it.
    pub fn loaded(&self) -> bool {
        matches!(self.probe, Some(Ok(_)))
    }
}

/// One level of the calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct CalStep {
    pub level: u64,
    pub rps: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub verdict: String,
}

/// The calibration's steps and what the profile takes from them.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    pub steps: Vec<CalStep>,
    pub levels: Vec<u64>,
    /// Why these levels, in a sentence.
    pub why: String,
    /// Suggested gates, each with its reason.
    pub gates: Vec<(String, String)>,
}

/// Latencies below this count as this when judging a doubling: a sub-millisecond call
/// doubles from scheduling noise alone.
const DOUBLING_FLOOR_MS: f64 = 1.0;
/// The sweep written when the calibration could not run.
const DEFAULT_LEVELS: [u64; 4] = [1, 2, 4, 8];

impl Calibration {
    /// The levels and gates a calibration run gives.
    pub fn of(run: &RunSummary) -> Calibration {
        let steps: Vec<CalStep> = run
            .steps
            .iter()
            .map(|s| CalStep {
                level: s.figures.concurrency.unwrap_or(0),
                rps: s.figures.throughput_rps,
                p50_ms: s.figures.p50_ms,
                p99_ms: s.figures.p99_ms,
                verdict: s.figures.verdict.as_str().to_owned(),
            })
            .collect();
        if steps.is_empty() {
            return Calibration::failed("it recorded no step".into());
        }
        let (levels, why) = sweep_levels(&steps);
        let mut gates = vec![(
            "anomalies==0".to_owned(),
            "no response unpaired, duplicated or malformed in any step".to_owned(),
        )];
        if let Some(m) = run.knee.max_sustainable {
            let half = ((m / 2.0).floor() as u64).max(1);
            gates.push((
                format!("max_sustainable>={half}"),
                format!("the calibration sustained {m} concurrent; half of it, for a busier day"),
            ));
        }
        if let Some(peak) = run.knee.peak_throughput_rps.filter(|p| *p > 0.0) {
            let half = two_digits_down(peak / 2.0);
            gates.push((
                format!("peak_throughput_rps>={}", number(half)),
                format!("the calibration peaked at {peak:.1} req/s; half of it"),
            ));
        }
        Calibration {
            steps,
            levels,
            why,
            gates,
        }
    }

    /// No calibration: a default sweep, and no gates but the anomaly one.
    pub fn failed(why: String) -> Calibration {
        Calibration {
            steps: Vec::new(),
            levels: DEFAULT_LEVELS.to_vec(),
            why: format!("The calibration could not run ({why}): a default sweep"),
            gates: vec![(
                "anomalies==0".to_owned(),
                "no response unpaired, duplicated or malformed in any step".to_owned(),
            )],
        }
    }
}

/// The sweep's levels from the calibration's steps: up to the first level whose p50 is at
/// least twice the first level's (floored at 1 ms), or that failed, then two levels beyond
/// (each doubling the last); every level calibrated, and two beyond, when none doubled.
pub(super) fn sweep_levels(steps: &[CalStep]) -> (Vec<u64>, String) {
    let Some(first) = steps.first() else {
        return (DEFAULT_LEVELS.to_vec(), "No calibration step".into());
    };
    let base = first.p50_ms.unwrap_or(0.0).max(DOUBLING_FLOOR_MS);
    let doubled = steps
        .iter()
        .skip(1)
        .position(|s| s.verdict == "failed" || s.p50_ms.is_none_or(|p| p >= 2.0 * base));
    let (upto, why) = match doubled {
        _ if first.verdict == "failed" => (
            1,
            format!(
                "The first level, {} concurrent, already failed: it, then two beyond",
                first.level
            ),
        ),
        Some(i) => {
            let s = &steps[i + 1];
            let what = if s.verdict == "failed" {
                format!("Step {} at {} concurrent failed", i + 2, s.level)
            } else {
                format!(
                    "The p50 doubled at {} concurrent ({} ms against {} ms at {})",
                    s.level,
                    ms(s.p50_ms.unwrap_or(0.0)),
                    ms(first.p50_ms.unwrap_or(0.0)),
                    first.level
                )
            };
            (i + 2, format!("{what}: levels up to it, then two beyond"))
        }
        None => (
            steps.len(),
            format!(
                "The p50 never doubled up to {} concurrent: every level calibrated, then two \
                 beyond",
                steps[steps.len() - 1].level
            ),
        ),
    };
    let mut levels: Vec<u64> = steps[..upto].iter().map(|s| s.level.max(1)).collect();
    for _ in 0..2 {
        let last = levels.last().copied().unwrap_or(1);
        levels.push(last * 2);
    }
    (levels, why)
}

/// The `[target]` table, twice: as written (variables in place of every header value and
/// token) and as the probe runs take it (without headers, which their command-line
/// overrides carry as given).
pub(super) struct Target {
    written: String,
    bare: String,
    /// The built-in target's settings, as the profile parser read them.
    pub builtin: Option<ServeConfig>,
    pub env: Vec<EnvVar>,
}

/// The `[target]` of the profile from the flags; each checked by the profile parser.
pub(super) fn target(opts: &InitOptions) -> Result<Target, InitError> {
    let mut head = String::from("[target]\n");
    let mut env = Vec::new();
    match &opts.target {
        InitTarget::Url(url) => {
            if let Some(auth) = url.split("://").nth(1).and_then(|r| r.split('/').next())
                && auth.contains('@')
            {
                return Err(InitError::Usage(format!(
                    "--url: {}: a URL holding credentials would write them into the profile; \
                     give them with -H 'Name: ${{VAR}}' or --bearer-env VAR",
                    crate::report::redact_url(url)
                )));
            }
            let _ = writeln!(head, "url = {}", quoted(url));
        }
        InitTarget::Stdio(cmd) => {
            let _ = writeln!(head, "stdio = {}", quoted(cmd));
        }
        InitTarget::Builtin(knobs) => {
            let table: Vec<String> = knobs
                .iter()
                .map(|(k, v)| {
                    let value = crate::run::builtin_knob_value(v);
                    format!("{} = {}", key(k), toml_value(&value))
                })
                .collect();
            if table.is_empty() {
                head.push_str("builtin = {}\n");
            } else {
                let _ = writeln!(head, "builtin = {{ {} }}", table.join(", "));
            }
        }
    }
    if let ProtocolChoice::Pinned(r) = opts.protocol {
        let _ = writeln!(head, "protocol = {}", quoted(r.as_str()));
    }
    let bare = head.clone();
    let mut written = head;
    if !opts.headers.is_empty() {
        written.push_str("\n[target.headers]\n");
        for (name, value) in &opts.headers {
            let (text, var) = header_reference(name, value);
            let _ = writeln!(written, "{} = {}", key(name), quoted(&text));
            env.extend(var);
        }
    }
    if let Some(var) = &opts.bearer_env {
        let _ = writeln!(
            written,
            "\n[target.auth]\nbearer_env = {}   # the token is read from ${var} when the run starts",
            quoted(var)
        );
        env.push(EnvVar {
            name: var.clone(),
            what: "the bearer token".into(),
        });
    }
    let usage = |e: String| InitError::Usage(format!("the [target] init would write: {e}"));
    check_text(&opts.file_name, &written).map_err(usage)?;
    let parsed = check_text(&opts.file_name, &bare).map_err(usage)?;
    Ok(Target {
        written,
        bare,
        builtin: parsed.target.into_inner().builtin,
        env,
    })
}

/// A header as the profile writes it: a value that names variables stays as it is; a
/// literal one becomes a variable (an `Authorization: Bearer …` its token only), since it
/// may be a secret. Returns the text and the variables to set.
fn header_reference(name: &str, value: &str) -> (String, Vec<EnvVar>) {
    if value.contains("${") {
        let vars = value
            .split("${")
            .skip(1)
            .filter_map(|r| r.split_once('}').map(|(v, _)| v))
            .map(|v| EnvVar {
                name: v.to_owned(),
                what: format!("read by the {name} header"),
            })
            .collect();
        return (value.to_owned(), vars);
    }
    if name.eq_ignore_ascii_case("authorization")
        && let Some((scheme, _)) = value.split_once(' ')
    {
        let var = "MCP_TOKEN".to_owned();
        let what = format!("the {scheme} token that was given to init in the {name} header");
        return (
            format!("{scheme} ${{{var}}}"),
            vec![EnvVar { name: var, what }],
        );
    }
    let var: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    let var = format!("MCP_HEADER_{var}");
    let what = format!("the value of the {name} header that was given to init");
    (format!("${{{var}}}"), vec![EnvVar { name: var, what }])
}

/// Where a tool goes by its annotations, else by what its name and description say.
pub(super) fn place(raw: &Value, info: &ToolInfo) -> ToolEntry {
    let hint = |k: &str| {
        raw.get("annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_bool)
    };
    let placed = if let Some(why) = &info.invalid {
        Placed::Invalid {
            why: format!(
                "its x-mcp-header annotations are invalid ({why}); mcpload never calls it"
            ),
        }
    } else if hint("readOnlyHint") == Some(true) {
        Placed::Load {
            why: "read-only (readOnlyHint)".into(),
        }
    } else if hint("destructiveHint") == Some(true) {
        Placed::Write {
            why: "destructive (destructiveHint): a load test would destroy data".into(),
        }
    } else if hint("readOnlyHint") == Some(false) {
        Placed::Write {
            why: "not read-only (readOnlyHint: false): a load test would change data".into(),
        }
    } else {
        let description = raw.get("description").and_then(Value::as_str);
        match write_word(&info.name, description) {
            Some((word, place)) => Placed::Write {
                why: format!(
                    "no annotations, and its {place} says \"{word}\": it looks like a write, \
                     and a load test would change data"
                ),
            },
            None => Placed::Load {
                why: "no annotations; nothing in its name or description says it writes".into(),
            },
        }
    };
    ToolEntry {
        info: info.clone(),
        placed,
        task: info.task_support == crate::client::TaskSupport::Required,
        probe: None,
    }
}

/// Verbs of tools that change data.
const WRITE_WORDS: &[&str] = &[
    "add",
    "append",
    "approve",
    "book",
    "cancel",
    "charge",
    "clear",
    "commit",
    "create",
    "decrement",
    "delete",
    "deploy",
    "destroy",
    "drop",
    "edit",
    "increment",
    "insert",
    "kill",
    "merge",
    "modify",
    "move",
    "order",
    "patch",
    "pay",
    "post",
    "publish",
    "purge",
    "push",
    "put",
    "refund",
    "register",
    "remove",
    "rename",
    "replace",
    "reset",
    "restart",
    "save",
    "send",
    "set",
    "start",
    "stop",
    "submit",
    "toggle",
    "transfer",
    "update",
    "upload",
    "upsert",
    "write",
];

/// Verbs of tools that only read: a name that starts with one (`get_post`, `list_orders`)
/// reads, whatever nouns follow it.
const READ_WORDS: &[&str] = &[
    "check", "count", "describe", "echo", "fetch", "find", "get", "inspect", "list", "lookup",
    "query", "read", "retrieve", "search", "show", "view",
];

/// Whether `word` is one of `words`, or is one with an `s`, `es`, `d` or `ed` added
/// (`adds` counts as `add`, `created` as `create`).
fn is_one_of(word: &str, words: &[&str]) -> bool {
    let w = word.to_ascii_lowercase();
    let stems = [
        Some(w.as_str()),
        w.strip_suffix("es"),
        w.strip_suffix('s'),
        w.strip_suffix("ed"),
        w.strip_suffix('d'),
    ];
    stems.into_iter().flatten().any(|s| words.contains(&s))
}

/// The word of a tool's name (split at `_`, `-`, `.`, spaces and camelCase) that is a write
/// verb, unless the name starts with a read verb; else the first word of its description
/// when that is a write verb; and where it was found.
pub(super) fn write_word(name: &str, description: Option<&str>) -> Option<(String, &'static str)> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c);
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    let reads = words.first().is_some_and(|w| is_one_of(w, READ_WORDS));
    if !reads && let Some(w) = words.into_iter().find(|w| is_one_of(w, WRITE_WORDS)) {
        return Some((w.to_ascii_lowercase(), "name"));
    }
    let first = description?
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| !w.is_empty())?;
    is_one_of(first, WRITE_WORDS).then(|| (first.to_ascii_lowercase(), "description"))
}

/// The canned answers the probes give and the profile keeps when a tool asked for input.
const INPUT_TABLE: &str = "[input]\n\
    elicitation = { action = \"accept\" }   # each requested field filled from its schema\n\
    sampling = \"mcpload canned answer\"\n\
    roots = [\"file:///tmp/mcpload\"]\n";

/// The canned answers of [`INPUT_TABLE`], as the profile parser reads them.
pub(super) fn canned_input() -> Option<crate::profile::InputAnswers> {
    let text = format!("[target]\nbuiltin = {{}}\n{INPUT_TABLE}");
    check_text("[input]", &text)
        .ok()?
        .input
        .map(toml::Spanned::into_inner)
}

/// What an entry of the mix carries besides the tool.
#[derive(Clone, Copy)]
struct Extras {
    /// The entry's own `timeout`.
    timeout: Option<Duration>,
    /// A task's `task_timeout`.
    task_timeout: Duration,
}

/// A `[[mix]]` entry calling `tool`.
fn entry(tool: &ToolEntry, extras: Extras) -> String {
    let info = &tool.info;
    let mut out = String::from("[[mix]]\n");
    let _ = writeln!(out, "name = {}", quoted(&info.name));
    out.push_str("method = \"tools/call\"\n");
    let _ = writeln!(out, "tool = {}", quoted(&info.name));
    if let Value::Object(args) = arguments(info)
        && !args.is_empty()
    {
        let _ = writeln!(out, "args = {}", json_inline(&Value::Object(args)));
    }
    if let Some(t) = extras.timeout {
        let _ = writeln!(out, "timeout = {}", quoted(&duration_text(t)));
    }
    if tool.task {
        out.push_str("task = true\n");
        let _ = writeln!(
            out,
            "task_timeout = {}",
            quoted(&duration_text(extras.task_timeout))
        );
    }
    out
}

/// The profile of one tool's probe.
pub(super) fn probe_profile(target: &Target, tool: &ToolEntry, probe: Duration) -> String {
    let extras = Extras {
        timeout: None,
        task_timeout: probe,
    };
    format!("{}\n{INPUT_TABLE}\n{}", target.bare, entry(tool, extras))
}

/// The profile of the calibration: the tools kept (without their own timeouts: the probe's
/// timeout bounds every request), or `tools/list`.
pub(super) fn calibration_profile(target: &Target, tools: &[ToolEntry], probe: Duration) -> String {
    let mut out = format!("{}\n{INPUT_TABLE}\n", target.bare);
    let extras = Extras {
        timeout: None,
        task_timeout: probe,
    };
    let mut any = false;
    for (t, _) in kept(tools) {
        let _ = writeln!(out, "{}", entry(t, extras));
        any = true;
    }
    if !any {
        out.push_str("[[mix]]\nmethod = \"tools/list\"\n");
    }
    out
}

/// The whole profile, every choice with its reason.
pub(super) fn profile(
    opts: &InitOptions,
    target: &Target,
    listing: &Listing,
    tools: &[ToolEntry],
    cal: &Calibration,
) -> String {
    let mut out = String::new();
    let s = &listing.server;
    let who = [
        s.server_info.get("name").and_then(Value::as_str),
        s.server_info.get("version").and_then(Value::as_str),
    ];
    let who: Vec<&str> = who.into_iter().flatten().collect();
    let described = match &opts.target {
        InitTarget::Url(u) => u.clone(),
        InitTarget::Stdio(c) => c.clone(),
        InitTarget::Builtin(_) => "the built-in target".into(),
    };
    let file = &opts.file_name;
    comment(
        &mut out,
        &format!(
            "{file}: a starter profile `mcpload init` wrote from {described} ({}protocol {}; \
             {}, {}, {}). Each choice below says why. Tools were \
             probed one call at a time for {} (each call allowed {}); the sweep and gates \
             come from a calibration of {} a level. Edit freely, then: mcpload run {file}",
            if who.is_empty() {
                String::new()
            } else {
                format!("{}, ", who.join(" "))
            },
            s.revision.as_str(),
            count(listing.tools.len(), "tool"),
            count(listing.prompts.len(), "prompt"),
            count(listing.resources.len(), "resource"),
            duration_text(super::PROBE_DURATION),
            duration_text(opts.probe_timeout),
            duration_text(super::CALIBRATION_STEP),
        ),
    );
    for v in &target.env {
        comment(
            &mut out,
            &format!(
                "Set {} before running: {} (never written here).",
                v.name, v.what
            ),
        );
    }
    let _ = writeln!(
        out,
        "description = {}\n",
        quoted(&format!("written by mcpload init from {described}"))
    );
    comment(
        &mut out,
        "Gates suggested from the calibration (uncomment those CI should hold; a step gate \
         such as p99_ms must hold in every step, past the knee too: docs/results.md, \
         \"Threshold gates\"):",
    );
    out.push_str("# thresholds = [\n");
    for (gate, why) in &cal.gates {
        let _ = writeln!(out, "#   {:<28} # {why}", format!("{},", quoted(gate)));
    }
    out.push_str("# ]\n\n");
    out.push_str(&target.written);
    out.push('\n');
    load_table(&mut out, cal, tools);
    let asked: Vec<&str> = kept(tools)
        .filter(|(_, p)| p.input_rounds)
        .map(|(t, _)| t.name())
        .collect();
    let asked = if asked.is_empty() {
        "No tool asked for input in the probes".to_owned()
    } else {
        format!("{} asked for input in the probes", asked.join(", "))
    };
    comment(
        &mut out,
        &format!(
            "Canned answers to the server's requests for input (docs/profiles.md, \"[input]\"). \
             The probes declared these capabilities too, and a server may list some tools \
             only to a client that can answer, so they stay: what was probed is what runs. \
             {asked}."
        ),
    );
    out.push_str(INPUT_TABLE);
    out.push('\n');
    for t in tools {
        tool_block(&mut out, t);
    }
    if !tools.iter().any(ToolEntry::loaded) {
        comment(
            &mut out,
            "No tool qualified (above): the mix is tools/list, which every server answers.",
        );
        out.push_str("[[mix]]\nmethod = \"tools/list\"\n\n");
    }
    other_lists(&mut out, listing);
    out
}

/// `[load]`: the calibration's table, the levels and why.
fn load_table(out: &mut String, cal: &Calibration, tools: &[ToolEntry]) {
    out.push_str("[load]\n");
    if !cal.steps.is_empty() {
        let what = if tools.iter().any(ToolEntry::loaded) {
            "the tools below"
        } else {
            "tools/list"
        };
        let _ = writeln!(
            out,
            "# Calibration ({what}, closed loop, {} a level):",
            duration_text(super::CALIBRATION_STEP)
        );
        let _ = writeln!(
            out,
            "#   {:>11}  {:>9}  {:>8}  {:>8}  verdict",
            "concurrency", "req/s", "p50 ms", "p99 ms"
        );
        let opt = |v: Option<f64>| v.map_or("-".to_owned(), ms);
        for s in &cal.steps {
            let _ = writeln!(
                out,
                "#   {:>11}  {:>9.1}  {:>8}  {:>8}  {}",
                s.level,
                s.rps,
                opt(s.p50_ms),
                opt(s.p99_ms),
                s.verdict
            );
        }
    }
    comment(out, &format!("{}.", cal.why));
    let levels: Vec<String> = cal.levels.iter().map(u64::to_string).collect();
    let _ = writeln!(out, "concurrency = [{}]", levels.join(", "));
    out.push_str("duration = \"10s\"   # measured time of each step\n");
    out.push_str("warmup = \"1s\"\n");
    out.push_str("timeout = \"5s\"     # for entries without a timeout of their own\n\n");
}

/// One tool's entry, loaded or commented out, with its reason.
fn tool_block(out: &mut String, t: &ToolEntry) {
    let name = t.name();
    let extras = |timeout| Extras {
        timeout,
        task_timeout: timeout.unwrap_or(super::PROBE_TIMEOUT),
    };
    let (lines, text) = match (&t.placed, &t.probe) {
        (Placed::Load { why }, Some(Ok(p))) => {
            let timeout = p.timeout();
            let mut lines = vec![format!(
                "{name}: {why}. Probe: {} calls, p50 {} ms, p99 {} ms, max {} ms; timeout {}, \
                 well above them.",
                p.calls,
                ms(p.p50_ms),
                ms(p.p99_ms),
                ms(p.max_ms),
                duration_text(timeout)
            )];
            lines.extend(notes(t, p));
            (lines, entry(t, extras(Some(timeout))))
        }
        (Placed::Load { why }, Some(Err(left_out))) => {
            let mut lines = vec![format!("LEFT OUT {name}: {left_out}.")];
            lines.push(format!(
                "Its place by annotations: {why}; annotations can be wrong, the probe decides."
            ));
            (lines, commented(&entry(t, extras(None))))
        }
        (Placed::Load { why }, None) => (
            vec![format!("LEFT OUT {name}: not probed ({why}).")],
            commented(&entry(t, extras(None))),
        ),
        (Placed::Write { why }, _) => (
            vec![format!(
                "WARNING: {name} is not loaded: {why}. init did not call it. Uncomment it \
                 only against a server whose data may change."
            )],
            commented(&entry(t, extras(None))),
        ),
        (Placed::Invalid { why }, _) => (
            vec![format!("LEFT OUT {name}: {why}.")],
            commented(&entry(t, extras(None))),
        ),
    };
    for l in lines {
        comment(out, &l);
    }
    out.push_str(&text);
    out.push('\n');
}

/// What else the profile says of a loaded tool: header-mirrored arguments, task mode, input.
fn notes(t: &ToolEntry, p: &Probed) -> Vec<String> {
    let mut lines = Vec::new();
    for h in &t.info.param_headers {
        lines.push(format!(
            "Argument `{}` also travels in the Mcp-Param-{} header (x-mcp-header).",
            h.path.join("."),
            h.name
        ));
    }
    if t.task {
        let why = if t.info.task_support == crate::client::TaskSupport::Required {
            "the server lists taskSupport: required"
        } else {
            "the server refused it as a plain call for want of the tasks extension"
        };
        lines.push(format!(
            "It runs as a task ({why}); task_timeout bounds the whole call."
        ));
    } else if t.info.task_support != crate::client::TaskSupport::Forbidden {
        lines.push("It may run as a task too: add `task = true` to load it so.".into());
    }
    if p.input_rounds {
        lines.push("It asked for input during the probe: answered from [input].".into());
    }
    lines
}

/// Prompts and resources, listed commented out.
fn other_lists(out: &mut String, listing: &Listing) {
    /// Entries written of each list at most.
    const SHOWN: usize = 10;
    let more = |n: usize| {
        if n > SHOWN {
            format!(" (the first {SHOWN} of {n})")
        } else {
            String::new()
        }
    };
    if !listing.resources.is_empty() {
        comment(
            out,
            &format!(
                "Resources the server lists{}: not probed; uncomment to load reads of them.",
                more(listing.resources.len())
            ),
        );
        for r in listing.resources.iter().take(SHOWN) {
            let Some(uri) = r.get("uri").and_then(Value::as_str) else {
                continue;
            };
            let text = format!(
                "[[mix]]\nmethod = \"resources/read\"\nuri = {}\n",
                quoted(uri)
            );
            out.push_str(&commented(&text));
            out.push('\n');
        }
    }
    if !listing.prompts.is_empty() {
        comment(
            out,
            &format!(
                "Prompts the server lists{}: not probed; uncomment to load them (required \
                 arguments filled with \"x\").",
                more(listing.prompts.len())
            ),
        );
        for p in listing.prompts.iter().take(SHOWN) {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            let mut text = format!(
                "[[mix]]\nmethod = \"prompts/get\"\nprompt = {}\n",
                quoted(name)
            );
            let required: Vec<String> = p
                .get("arguments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|a| a.get("required").and_then(Value::as_bool) == Some(true))
                .filter_map(|a| a.get("name").and_then(Value::as_str))
                .map(|n| format!("{} = \"x\"", key(n)))
                .collect();
            if !required.is_empty() {
                let _ = writeln!(text, "args = {{ {} }}", required.join(", "));
            }
            out.push_str(&commented(&text));
            out.push('\n');
        }
    }
}

/// `n` things, in the plural when need be.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// Every line of `text` commented out.
fn commented(text: &str) -> String {
    text.lines().map(|l| format!("# {l}\n")).collect()
}

/// `text` as `#` comment lines of at most about 96 characters.
fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 96 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A TOML basic string: JSON's escapes (`\"`, `\\`, `\n`, `\u0001`, …) are TOML's too.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A TOML key: bare when it may be, else quoted.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        quoted(k)
    }
}

/// A TOML value on one line (tables inline).
fn toml_value(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => quoted(s),
        toml::Value::Array(a) => {
            let items: Vec<String> = a.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            let items: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), toml_value(v)))
                .collect();
            if items.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => json_inline(&Value::from(*f)),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
    }
}

/// A JSON value as TOML on one line; a JSON `null` (which TOML lacks) is left out of its
/// table or list.
fn json_inline(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.1}"),
            (None, Some(f)) => f.to_string(),
            (None, None) => n.to_string(),
        },
        Value::Array(a) => {
            let items: Vec<String> = a.iter().filter(|x| !x.is_null()).map(json_inline).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| format!("{} = {}", key(k), json_inline(x)))
                .collect();
            if items.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
        Value::Null => "\"\"".into(),
    }
}

/// Milliseconds as a person writes them: 0.42, 3.1, 812.
fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A whole number without `.0`, else with what it has.
fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        v.to_string()
    }
}

/// `v` rounded down to two significant digits (412.7 → 410, 3.46 → 3.4).
fn two_digits_down(v: f64) -> f64 {
    if v <= 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(v.log10().floor() as i32 - 1);
    (v / scale).floor() * scale
}

/// The smallest of 1, 2, 5 × 10^k milliseconds at least `ms`.
fn nice_ceiling_ms(ms: f64) -> Duration {
    let mut unit = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            if m * unit >= ms {
                return Duration::from_millis((m * unit) as u64);
            }
        }
        unit *= 10.0;
    }
}

/// A duration as a profile writes it: `2s`, `500ms`.
pub(super) fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(level: u64, p50: f64, verdict: &str) -> CalStep {
        CalStep {
            level,
            rps: 100.0,
            p50_ms: Some(p50),
            p99_ms: Some(p50 * 2.0),
            verdict: verdict.into(),
        }
    }

    #[test]
    fn the_sweep_goes_to_where_latency_doubles_then_two_beyond() {
        let steps = [
            step(1, 4.0, "ok"),
            step(2, 4.2, "ok"),
            step(4, 5.0, "ok"),
            step(8, 8.1, "saturated"),
            step(16, 16.0, "saturated"),
        ];
        let (levels, why) = sweep_levels(&steps);
        assert_eq!(levels, [1, 2, 4, 8, 16, 32]);
        assert!(why.contains("doubled at 8"), "{why}");
        // A failed step ends it too; sub-millisecond noise does not double.
        let steps = [
            step(1, 0.2, "ok"),
            step(2, 0.9, "ok"),
            step(4, 1.0, "failed"),
        ];
        assert_eq!(sweep_levels(&steps).0, [1, 2, 4, 8, 16]);
        // Never doubled: every level, then two beyond.
        let steps = [step(1, 3.0, "ok"), step(2, 3.0, "ok")];
        assert_eq!(sweep_levels(&steps).0, [1, 2, 4, 8]);
        // Failed from the first level: it, then two beyond.
        let (levels, why) = sweep_levels(&[step(1, 3.0, "failed"), step(2, 9.0, "failed")]);
        assert_eq!(levels, [1, 2, 4]);
        assert!(why.contains("already failed"), "{why}");
    }

    #[test]
    fn timeouts_are_well_above_the_slowest_call_and_round() {
        let p = |max_ms| Probed {
            calls: 1,
            p50_ms: 0.0,
            p99_ms: 0.0,
            max_ms,
            input_rounds: false,
        };
        assert_eq!(p(0.4).timeout(), Duration::from_secs(1));
        assert_eq!(p(130.0).timeout(), Duration::from_secs(2));
        assert_eq!(p(300.0).timeout(), Duration::from_secs(5));
        assert_eq!(p(1900.0).timeout(), Duration::from_secs(20));
        assert_eq!(duration_text(Duration::from_millis(500)), "500ms");
        assert_eq!(two_digits_down(412.7), 410.0);
    }

    #[test]
    fn writes_are_told_by_annotations_then_by_words() {
        let info = |name: &str| {
            ToolInfo::new(name.into(), json!({}), crate::client::Revision::V2025_11_25)
        };
        let placed = |raw: Value| place(&raw, &info(raw["name"].as_str().unwrap())).placed;
        let ro = json!({"name": "trigger-long-running-operation",
                        "annotations": {"readOnlyHint": true, "destructiveHint": false}});
        assert!(matches!(placed(ro), Placed::Load { .. }));
        let rw = json!({"name": "toggle-x", "annotations": {"readOnlyHint": false}});
        assert!(matches!(placed(rw), Placed::Write { .. }));
        let d = json!({"name": "wipe", "annotations": {"destructiveHint": true}});
        assert!(matches!(placed(d), Placed::Write { why } if why.contains("destructiveHint")));
        assert_eq!(
            write_word("counter_add", None),
            Some(("add".into(), "name"))
        );
        assert_eq!(
            write_word("createUser", None),
            Some(("create".into(), "name"))
        );
        assert_eq!(
            write_word("sum", Some("Adds two numbers.")),
            Some(("adds".into(), "description"))
        );
        assert_eq!(write_word("get-sum", Some("Returns the sum")), None);
        // A name that starts by reading reads, whatever nouns follow.
        assert_eq!(write_word("get_post", None), None);
        assert_eq!(write_word("listOrders", Some("Lists the orders")), None);
        assert_eq!(
            write_word("job_start", None),
            Some(("start".into(), "name"))
        );
        assert_eq!(write_word("echo", Some("Echoes the message")), None);
        assert!(matches!(
            placed(json!({"name": "echo"})),
            Placed::Load { .. }
        ));
    }

    #[test]
    fn secrets_become_variables() {
        let (text, vars) = header_reference("Authorization", "Bearer s3cret");
        assert_eq!(text, "Bearer ${MCP_TOKEN}");
        assert_eq!(vars[0].name, "MCP_TOKEN");
        let (text, vars) = header_reference("X-Api-Key", "s3cret");
        assert_eq!(text, "${MCP_HEADER_X_API_KEY}");
        assert_eq!(vars[0].name, "MCP_HEADER_X_API_KEY");
        let (text, vars) = header_reference("X-Tenant", "${TENANT}-eu");
        assert_eq!(text, "${TENANT}-eu");
        assert_eq!(vars[0].name, "TENANT");
    }

    #[test]
    fn json_arguments_become_inline_toml() {
        let v = json!({"a": 1, "b": 2.0, "c": "x\"y", "d": [true, null], "e": {"f": null}, "odd key": 1.5});
        assert_eq!(
            json_inline(&v),
            r#"{ a = 1, b = 2.0, c = "x\"y", d = [true], e = {}, "odd key" = 1.5 }"#
        );
    }
}
