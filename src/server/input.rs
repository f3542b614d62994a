//! Input-required rounds (multi round-trip requests, 2026-07-28) of the `ask_input` tool:
//! each round answers `resultType: "input_required"` with one input request per kind asked
//! for (an elicitation form, a sampling message, a roots list) and a `requestState` bound
//! to the call's arguments and round; the client's retry must echo that state and answer
//! every key. After the last round the call completes, or becomes a task. Nothing is held
//! per call: the state travels with the client, keyed by a secret of this target.

use super::stats::{InputCounters, Stats};
use super::wire::invalid_params;
use crate::jsonrpc::ErrorObject;
use serde_json::{Map, Value, json};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Longest `ms` a `sleep` call or an `ask_input` round may ask for.
pub(crate) const SLEEP_MAX_MS: u64 = 600_000;

/// Most rounds one call may ask for.
pub(crate) const ROUNDS_MAX: u64 = 10;

/// A kind of input request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Elicitation,
    Sampling,
    Roots,
}

impl Kind {
    pub(crate) const ALL: [Kind; 3] = [Kind::Elicitation, Kind::Sampling, Kind::Roots];

    /// The name in `kinds` and in the request keys; also the client capability it needs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Elicitation => "elicitation",
            Kind::Sampling => "sampling",
            Kind::Roots => "roots",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The input request of round `round` (from 1).
    fn request(self, round: u64) -> Value {
        match self {
            Kind::Elicitation => json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": format!("Round {round}: please provide your name"),
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }),
            Kind::Sampling => json!({
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{
                        "role": "user",
                        "content": {"type": "text", "text": format!("Round {round}: say something")},
                    }],
                    "maxTokens": 100,
                },
            }),
            Kind::Roots => json!({"method": "roots/list", "params": {}}),
        }
    }

    /// Whether `r` is a valid answer to this kind's request: an `ElicitResult` (an accept
    /// carries `content.name`, a string), a `CreateMessageResult`, a `ListRootsResult`.
    fn valid(self, r: &Value) -> bool {
        match self {
            Kind::Elicitation => match r["action"].as_str() {
                Some("accept") => r["content"]["name"].is_string(),
                Some("decline" | "cancel") => true,
                _ => false,
            },
            Kind::Sampling => {
                r["role"].is_string() && (r["content"].is_object() || r["content"].is_array())
            }
            Kind::Roots => r["roots"]
                .as_array()
                .is_some_and(|roots| roots.iter().all(|root| root["uri"].is_string())),
        }
    }
}

/// A call of `ask_input`, read and checked.
#[derive(Debug)]
pub(crate) struct AskInput {
    rounds: u64,
    kinds: Vec<Kind>,
    /// After the last round the call becomes a task of `ms` milliseconds.
    pub then_task: bool,
    pub ms: u64,
    /// The call's arguments, canonical (sorted keys): the state is bound to them.
    arguments: String,
    responses: Option<Value>,
    state: Option<String>,
}

/// Where a call of `ask_input` goes next.
pub(crate) enum Step {
    /// Another round: the `InputRequiredResult` (without `resultType`).
    Ask(Value),
    /// The last round was answered: the tool's result.
    Complete(Value),
    /// The last round was answered: the call becomes a task.
    Task,
}

impl AskInput {
    /// Reads the arguments (`rounds` 1..=10, default 1; `kinds`, default `["elicitation"]`;
    /// `then`: `complete` or `task`; `ms`) and the retry's `inputResponses` and
    /// `requestState`.
    pub(crate) fn read(
        arguments: Option<&str>,
        responses: Option<&str>,
        state: Option<String>,
    ) -> Result<AskInput, ErrorObject> {
        let bad =
            |why: &str| invalid_params(format!("Invalid arguments for tool ask_input: {why}"));
        let args: Value = match arguments {
            None => json!({}),
            Some(a) => serde_json::from_str(a).map_err(|_| bad("not JSON"))?,
        };
        let rounds = match &args["rounds"] {
            Value::Null => 1,
            v => v
                .as_u64()
                .filter(|n| (1..=ROUNDS_MAX).contains(n))
                .ok_or_else(|| bad("`rounds` must be from 1 to 10"))?,
        };
        let kinds = match &args["kinds"] {
            Value::Null => vec![Kind::Elicitation],
            Value::Array(a) if !a.is_empty() => {
                let mut kinds = Vec::new();
                for k in a {
                    let kind = k
                        .as_str()
                        .and_then(Kind::parse)
                        .ok_or_else(|| bad("`kinds` members are elicitation, sampling, roots"))?;
                    if kinds.contains(&kind) {
                        return Err(bad("`kinds` names a kind twice"));
                    }
                    kinds.push(kind);
                }
                kinds
            }
            _ => return Err(bad("`kinds` must be a non-empty array")),
        };
        let then_task = match args["then"].as_str() {
            None if args["then"].is_null() => false,
            Some("complete") => false,
            Some("task") => true,
            _ => return Err(bad("`then` is complete or task")),
        };
        let ms = match &args["ms"] {
            Value::Null => 0,
            v => v
                .as_u64()
                .filter(|ms| *ms <= SLEEP_MAX_MS)
                .ok_or_else(|| bad("`ms` must be an integer from 0 to 600000"))?,
        };
        let responses = match responses {
            None => None,
            Some(r) => match serde_json::from_str::<Value>(r) {
                Ok(v @ Value::Object(_)) => Some(v),
                _ => return Err(invalid_params("inputResponses must be an object")),
            },
        };
        Ok(AskInput {
            rounds,
            kinds,
            then_task,
            ms,
            arguments: args.to_string(),
            responses,
            state,
        })
    }

    /// The client capabilities this call needs (one per kind), by name.
    pub(crate) fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.kinds.iter().copied()
    }

    /// The next step of this call, counted (`salt`: the target's secret).
    pub(crate) fn step(&self, salt: u64, counters: &InputCounters) -> Result<Step, ErrorObject> {
        let Some(responses) = &self.responses else {
            if self.state.is_some() {
                Stats::add(&counters.state_invalid, 1);
                return Err(invalid_params(
                    "requestState without inputResponses: answer the round's inputRequests",
                ));
            }
            return Ok(self.ask(0, salt, counters));
        };
        let Some(round) = self.state.as_deref().and_then(|s| self.round_of(s, salt)) else {
            Stats::add(&counters.state_invalid, 1);
            return Err(invalid_params(
                "requestState is missing, altered, or from another call: echo the \
                 requestState of the input_required result",
            ));
        };
        let mut missing = false;
        for kind in &self.kinds {
            match responses.get(key(*kind, round).as_str()) {
                None => missing = true,
                Some(r) if kind.valid(r) => {}
                Some(r) => {
                    Stats::add(&counters.responses_invalid, 1);
                    return Err(invalid_params(format!(
                        "inputResponses[{}] is no valid {} response: {r}",
                        key(*kind, round),
                        kind.name()
                    )));
                }
            }
        }
        if missing {
            Stats::add(&counters.responses_missing, 1);
            return Ok(self.ask(round, salt, counters));
        }
        Stats::add(&counters.rounds_answered, 1);
        if round + 1 < self.rounds {
            return Ok(self.ask(round + 1, salt, counters));
        }
        if self.then_task {
            Stats::add(&counters.to_task, 1);
            return Ok(Step::Task);
        }
        Stats::add(&counters.completed, 1);
        let text = format!(
            "answered {} round(s) of {}",
            self.rounds,
            self.kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(Step::Complete(json!({
            "content": [{"type": "text", "text": text}],
            "isError": false,
        })))
    }

    /// The `InputRequiredResult` of round `round` (from 0).
    fn ask(&self, round: u64, salt: u64, counters: &InputCounters) -> Step {
        Stats::add(&counters.rounds_asked, 1);
        let requests: Map<String, Value> = self
            .kinds
            .iter()
            .map(|k| (key(*k, round), k.request(round + 1)))
            .collect();
        Step::Ask(json!({
            "inputRequests": requests,
            "requestState": format!("r{round}.{:016x}", self.mac(round, salt)),
        }))
    }

    /// The round a `requestState` names, when it is one this target gave for these
    /// arguments.
    fn round_of(&self, state: &str, salt: u64) -> Option<u64> {
        let (round, mac) = state.strip_prefix('r')?.split_once('.')?;
        let round: u64 = round.parse().ok()?;
        let mac = u64::from_str_radix(mac, 16).ok()?;
        (round < self.rounds && mac == self.mac(round, salt)).then_some(round)
    }

    fn mac(&self, round: u64, salt: u64) -> u64 {
        let mut h = DefaultHasher::new();
        (salt, round, "ask_input", &self.arguments).hash(&mut h);
        h.finish()
    }
}

/// The key of `kind`'s request in round `round` (from 0): `elicitation-1`, … (unique
/// within a request, and over the rounds of a call).
fn key(kind: Kind, round: u64) -> String {
    format!("{}-{}", kind.name(), round + 1)
}
