//! Reading a result for an `input_required` (2026-07-28) that nothing answers: which kinds
//! of input the run's `[input]` answers ([`InputCover`]), and the first kind a result asks
//! for that it does not. The cheap test (a byte search for `input_required`) runs on every
//! `ok` result of a run that reads them; the parse only on a result that has it.

use crate::metrics::AskedKind;
use memchr::memmem::Finder;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The byte search for `input_required`, built once: `memmem::find` builds its searcher on
/// every call, a cost paid on every answer (1% of a closed loop's CPU against the built-in
/// target, `perf record`).
static INPUT_REQUIRED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"input_required"));

/// The kinds of input a run answers (its `[input]` table): results asking for any other
/// kind end their request as `input_unanswered`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InputCover {
    pub elicitation: bool,
    pub sampling: bool,
    pub roots: bool,
}

impl InputCover {
    pub fn answers(&self, kind: AskedKind) -> bool {
        match kind {
            AskedKind::Elicitation => self.elicitation,
            AskedKind::Sampling => self.sampling,
            AskedKind::Roots => self.roots,
            AskedKind::Other => false,
        }
    }

    /// The first kind (in [`AskedKind::ALL`] order) `result` asks for and this cover does not
    /// answer, when `result` is an `input_required` result; `None` for any other result, or
    /// one answered in full.
    pub fn unanswered(&self, result: &RawValue) -> Option<AskedKind> {
        INPUT_REQUIRED.find(result.get().as_bytes())?;
        let asked: Asked<'_> = serde_json::from_str(result.get()).ok()?;
        if asked.result_type.as_deref() != Some("input_required") {
            return None;
        }
        let requests = asked.input_requests.unwrap_or_default();
        if requests.is_empty() {
            // Asked for nothing but a retry with its state: a run with `[input]` sends one.
            return (*self == InputCover::default()).then_some(AskedKind::Other);
        }
        let asked = |k: &AskedKind| {
            requests
                .values()
                .any(|r| AskedKind::of_method(&r.method) == *k)
        };
        AskedKind::ALL
            .into_iter()
            .find(|k| !self.answers(*k) && asked(k))
    }
}

#[derive(Deserialize)]
struct Asked<'a> {
    #[serde(rename = "resultType", borrow)]
    result_type: Option<Cow<'a, str>>,
    #[serde(rename = "inputRequests", borrow)]
    input_requests: Option<BTreeMap<Cow<'a, str>, Request<'a>>>,
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow, default)]
    method: Cow<'a, str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn only_an_input_required_result_with_a_kind_left_open_is_unanswered() {
        let asks = raw(r#"{"resultType":"input_required","inputRequests":{
            "a":{"method":"elicitation/create","params":{}},
            "b":{"method":"roots/list"}},"requestState":"s"}"#);
        let none = InputCover::default();
        assert_eq!(none.unanswered(&asks), Some(AskedKind::Elicitation));
        let elicit = InputCover {
            elicitation: true,
            ..InputCover::default()
        };
        assert_eq!(elicit.unanswered(&asks), Some(AskedKind::Roots));
        let all = InputCover {
            elicitation: true,
            sampling: true,
            roots: true,
        };
        assert_eq!(all.unanswered(&asks), None);
        let plain = raw(r#"{"content":[{"type":"text","text":"input_required"}]}"#);
        assert_eq!(none.unanswered(&plain), None);
        let empty = raw(r#"{"resultType":"input_required","requestState":"s"}"#);
        assert_eq!(none.unanswered(&empty), Some(AskedKind::Other));
        assert_eq!(all.unanswered(&empty), None);
    }
}
