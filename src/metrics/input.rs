//! Input requests nobody answered (docs/metrics.md, "Input nobody answers"): the counts by
//! kind of `input_unanswered` and `input_refused`, mergeable with `+=` like every count.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// A kind of input a server asks a client for, as the counts by kind name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AskedKind {
    Elicitation,
    Sampling,
    Roots,
    /// A method that is none of the three.
    Other,
}

impl AskedKind {
    pub const ALL: [AskedKind; 4] = [
        AskedKind::Elicitation,
        AskedKind::Sampling,
        AskedKind::Roots,
        AskedKind::Other,
    ];

    /// The kind a request's `method` asks for.
    pub fn of_method(method: &str) -> AskedKind {
        match method {
            "elicitation/create" => AskedKind::Elicitation,
            "sampling/createMessage" => AskedKind::Sampling,
            "roots/list" => AskedKind::Roots,
            _ => AskedKind::Other,
        }
    }

    /// Its name in the counts by kind; also the client capability and the `[input]` key that
    /// answer it (none for `other`).
    pub fn name(self) -> &'static str {
        match self {
            AskedKind::Elicitation => "elicitation",
            AskedKind::Sampling => "sampling",
            AskedKind::Roots => "roots",
            AskedKind::Other => "other",
        }
    }

    /// The `[input]` line that would answer it, for the terminal and report.html.
    pub fn input_line(self) -> Option<&'static str> {
        match self {
            AskedKind::Elicitation => Some(r#"elicitation = { action = "accept" }"#),
            AskedKind::Sampling => Some(r#"sampling = "a canned reply""#),
            AskedKind::Roots => Some(r#"roots = ["file:///tmp"]"#),
            AskedKind::Other => None,
        }
    }
}

/// Counts by kind of input asked for (summary.json: an object keyed by kind name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByKind {
    #[serde(default)]
    pub elicitation: u64,
    #[serde(default)]
    pub sampling: u64,
    #[serde(default)]
    pub roots: u64,
    #[serde(default)]
    pub other: u64,
}

impl ByKind {
    pub fn count(&mut self, kind: AskedKind) {
        *self.slot(kind) += 1;
    }

    pub fn get(&self, kind: AskedKind) -> u64 {
        match kind {
            AskedKind::Elicitation => self.elicitation,
            AskedKind::Sampling => self.sampling,
            AskedKind::Roots => self.roots,
            AskedKind::Other => self.other,
        }
    }

    /// The kinds counted at least once, in a fixed order.
    pub fn kinds(&self) -> impl Iterator<Item = AskedKind> + '_ {
        AskedKind::ALL.into_iter().filter(|k| self.get(*k) > 0)
    }

    /// These counts less `o`'s (floored at 0).
    pub fn less(&self, o: &ByKind) -> ByKind {
        ByKind {
            elicitation: self.elicitation.saturating_sub(o.elicitation),
            sampling: self.sampling.saturating_sub(o.sampling),
            roots: self.roots.saturating_sub(o.roots),
            other: self.other.saturating_sub(o.other),
        }
    }

    fn slot(&mut self, kind: AskedKind) -> &mut u64 {
        match kind {
            AskedKind::Elicitation => &mut self.elicitation,
            AskedKind::Sampling => &mut self.sampling,
            AskedKind::Roots => &mut self.roots,
            AskedKind::Other => &mut self.other,
        }
    }
}

impl AddAssign<&ByKind> for ByKind {
    fn add_assign(&mut self, o: &ByKind) {
        self.elicitation += o.elicitation;
        self.sampling += o.sampling;
        self.roots += o.roots;
        self.other += o.other;
    }
}
