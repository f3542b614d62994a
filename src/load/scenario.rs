//! Scenarios compiled for the agreed revision: each step's calls rendered like the mix's
//! operations (with the iteration's variables and CSV row), its captures, conditions and
//! assertions parsed, its think times ready to draw. A mix entry in a profile that has
//! scenarios becomes a one-step scenario.

use super::mix::{CsvData, Mix, MixOp, OpNames, Request, toml_to_json};
use super::template::Rng;
use crate::client::ServerInfo;
use crate::metrics::{Defect, ScenarioNames};
use crate::profile::expr::Expr;
use crate::profile::{self, Capture, PollRules, Think};
use std::sync::Arc;
use std::time::Duration;

/// Every scenario of a run with its cumulative weights.
#[derive(Debug)]
pub struct Scenarios {
    pub list: Vec<Scenario>,
    cumulative: Vec<f64>,
    /// The operation of every scenario step that calls a tool, with the tool's name (the
    /// mix's own entries are the mix's: [`Mix::called_tools`]).
    tools: Vec<(u16, String)>,
}

impl Scenarios {
    pub fn new(list: Vec<Scenario>) -> Result<Self, String> {
        if list.is_empty() {
            return Err("no scenario".into());
        }
        let mut acc = 0.0;
        let cumulative = list
            .iter()
            .map(|s| {
                acc += s.weight;
                acc
            })
            .collect();
        Ok(Scenarios {
            list,
            cumulative,
            tools: Vec::new(),
        })
    }

    /// The scenario steps' `tools/call` operations and their tools, so that each result is
    /// read by its tool's rules (its `outputSchema`).
    pub fn called_tools(&self) -> &[(u16, String)] {
        &self.tools
    }

    /// The names each scenario and its steps report under.
    pub fn names(&self) -> Vec<ScenarioNames> {
        self.list
            .iter()
            .map(|s| ScenarioNames {
                scenario: s.name.clone(),
                steps: s.steps.iter().map(|st| st.name.clone()).collect(),
            })
            .collect()
    }

    /// Draws a scenario's number by weight.
    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.list.len() == 1 {
            return 0;
        }
        let total = *self.cumulative.last().expect("non-empty");
        let x = rng.unit() * total;
        self.cumulative
            .partition_point(|c| *c <= x)
            .min(self.list.len() - 1)
    }
}

/// One scenario: what a virtual user does in one iteration.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub weight: f64,
    /// One row per iteration, for `{{csv:COLUMN}}` in any of its calls (kept for its rows'
    /// lifetime; each call holds it too).
    pub csv: Option<Arc<CsvData>>,
    pub steps: Vec<Step>,
    /// Whether any step polls (then polls per iteration are recorded).
    pub polls: bool,
    /// Whether any step tallies (then an iteration keeps the ids it sent, for evidence).
    pub tallies: bool,
}

#[derive(Debug)]
pub struct Step {
    pub name: String,
    pub kind: StepKind,
}

#[derive(Debug)]
pub enum StepKind {
    Call(Call),
    Poll(Poll),
    /// Calls in flight at once; the step ends when all have settled.
    Parallel(Vec<Call>),
    /// Assertions over the iteration's variables.
    Expect(Vec<Expr>),
    /// Defects counted from the iteration's variables.
    Tally(Vec<(Defect, Expr)>),
    Think(Think),
}

/// One request of a step (sent `copies` times at once in a parallel step) and what it takes
/// out of the answer.
#[derive(Debug)]
pub struct Call {
    pub op: MixOp,
    pub captures: Vec<Capture>,
    /// With more than one, each capture collects a list of the copies' values.
    pub copies: u32,
}

#[derive(Debug)]
pub struct Poll {
    pub call: Call,
    pub rules: PollRules,
}

/// Draws a pause: fixed, uniform between two bounds, or exponential around a mean.
pub fn draw(think: Think, rng: &mut Rng) -> Duration {
    match think {
        Think::Fixed(d) => d,
        Think::Uniform { min, max } => min + max.saturating_sub(min).mul_f64(rng.unit()),
        // 1 - u is in (0, 1], so the logarithm is finite.
        Think::Exponential { mean } => mean.mul_f64(-(1.0 - rng.unit()).ln()),
    }
}

/// Compiles the profile's scenarios for the server's revision (and its tools' `Mcp-Param-*`
/// headers), after the mix's entries (each a one-step scenario of its own weight). Scenario
/// calls count under `scenario/step` (and
/// `scenario/step/member` in a parallel step), numbered after the mix's operations.
pub fn compile(
    mix: &Mix,
    scenarios: &[profile::Scenario],
    server: &ServerInfo,
    base: &std::path::Path,
) -> Result<(Scenarios, Vec<String>), String> {
    let revision = server.revision;
    let mut names = OpNames::continuing(mix.names());
    let mut tools = Vec::new();
    let mut list: Vec<Scenario> = mix
        .weighted()
        .map(|(op, weight)| Scenario {
            name: mix.names()[op.op as usize].clone(),
            weight,
            csv: None,
            steps: vec![Step {
                name: mix.names()[op.op as usize].clone(),
                kind: StepKind::Call(Call {
                    op: op.clone(),
                    captures: Vec::new(),
                    copies: 1,
                }),
            }],
            polls: false,
            tallies: false,
        })
        .collect();
    for sc in scenarios {
        if mix.names().contains(&sc.name) {
            return Err(format!(
                "scenario `{}`: a [[mix]] entry has that name too, and each is reported under \
                 its name (scenarios.csv); rename one",
                sc.name
            ));
        }
        let csv = match &sc.csv {
            Some(p) => Some(Arc::new(CsvData::read(&base.join(p))?)),
            None => None,
        };
        let mut call =
            |step: &str, member: Option<&str>, c: &profile::Call, captures: &[profile::Capture]| {
                let name = match member {
                    Some(m) => format!("{}/{step}/{m}", sc.name),
                    None => format!("{}/{step}", sc.name),
                };
                let args = c.args.as_ref().map(toml_to_json);
                let params = c.params.as_ref().map(toml_to_json);
                let listed = (c.method == "tools/call")
                    .then(|| c.tool.as_deref().and_then(|t| server.tool(t)))
                    .flatten();
                if let Some(why) = listed.and_then(|t| t.invalid.as_ref()) {
                    return Err(format!(
                        "scenario `{}`, step `{step}`: tool {}: {why}; a tool with an invalid \
                         x-mcp-header annotation is never called",
                        sc.name,
                        c.tool.as_deref().unwrap_or("")
                    ));
                }
                let req = Request {
                    method: &c.method,
                    tool: c.tool.as_deref(),
                    prompt: c.prompt.as_deref(),
                    uri: c.uri.as_ref().map(|u| u.0.as_str()),
                    args: args.as_ref(),
                    params: params.as_ref(),
                    param_headers: listed.map_or(&[], |t| &t.param_headers),
                    meta: None,
                    task: None,
                    progress: false,
                };
                let op = MixOp::compile(req, revision, csv.clone(), &name, &mut names)
                    .map_err(|e| format!("scenario `{}`, step `{step}`: {e}", sc.name))?;
                if let (true, Some(tool)) = (c.method == "tools/call", &c.tool) {
                    tools.push((op.op, tool.clone()));
                }
                Ok::<_, String>(Call {
                    op,
                    captures: captures.to_vec(),
                    copies: 1,
                })
            };
        let mut steps = Vec::with_capacity(sc.steps.len());
        for st in &sc.steps {
            let kind = match &st.kind {
                profile::StepKind::Call { call: c, captures } => {
                    StepKind::Call(call(&st.name, None, c, captures)?)
                }
                profile::StepKind::Poll(p) => StepKind::Poll(Poll {
                    call: call(&st.name, None, &p.call, &p.captures)?,
                    rules: p.rules.clone(),
                }),
                profile::StepKind::Parallel(members) => StepKind::Parallel(
                    members
                        .iter()
                        .map(|m| {
                            call(&st.name, Some(&m.name), &m.call, &m.captures).map(|c| Call {
                                copies: m.copies,
                                ..c
                            })
                        })
                        .collect::<Result<_, _>>()?,
                ),
                profile::StepKind::Expect(checks) => StepKind::Expect(checks.clone()),
                profile::StepKind::Tally(counts) => StepKind::Tally(counts.clone()),
                profile::StepKind::Think(t) => StepKind::Think(*t),
            };
            steps.push(Step {
                name: st.name.clone(),
                kind,
            });
        }
        list.push(Scenario {
            name: sc.name.clone(),
            weight: sc.weight as f64,
            csv,
            polls: steps.iter().any(|s| matches!(s.kind, StepKind::Poll(_))),
            tallies: steps.iter().any(|s| matches!(s.kind, StepKind::Tally(_))),
            steps,
        });
    }
    let mut compiled = Scenarios::new(list)?;
    compiled.tools = tools;
    Ok((compiled, names.into_vec()))
}
