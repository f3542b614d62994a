//! The expression language of scenario steps (`until`, `expect`, `capture`, `tally`): paths
//! into the answer and the iteration's variables, literals, arithmetic, comparisons, `in`,
//! `and` / `or` / `not`, and the functions `len` and `distinct`. Parsed once when the profile is read (errors name a column); evaluated
//! without panicking, each failure said in words (docs/profiles.md, "Expressions").

use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt;

/// The deepest an expression may nest (parentheses, lists, `not`, unary `-`): the parser
/// recurses per level.
const MAX_DEPTH: usize = 64;
/// The most parts (values, paths, operators) an expression may have: evaluating (and
/// dropping) the tree recurses at most this deep.
const MAX_NODES: usize = 256;

/// A text that is not an expression: where (1-based column, in characters) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct ExprError {
    pub column: usize,
    pub message: String,
}

/// Why an expression could not be evaluated against an answer, in the user's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    pub message: String,
}

fn fail<T>(message: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError {
        message: message.into(),
    })
}

/// What an expression can read.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The iteration's captured variables (`var.NAME`).
    pub vars: &'a Map<String, Value>,
    /// The whole answer, `{"result": …}` or `{"error": …}` (`result.…`, `error.…`); none
    /// before any answer (an `expect` step).
    pub answer: Option<&'a Value>,
}

/// Where a path starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// The captured variables: `var.NAME`.
    Var,
    /// The answer's `result` member.
    Result,
    /// The answer's `error` member.
    Error,
}

impl Root {
    fn name(self) -> &'static str {
        match self {
            Root::Var => "var",
            Root::Result => "result",
            Root::Error => "error",
        }
    }
}

/// One step of a path: `.name` / `["quoted key"]`, or `[index]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// A path such as `result.content[0].text` or `var.job_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    pub root: Root,
    /// For `var`, the first is the variable's name.
    pub segments: Vec<Segment>,
}

impl Path {
    /// Parses a text that is one path and nothing else (a `capture`).
    pub fn parse(text: &str) -> Result<Path, ExprError> {
        let mut p = Parser::new(text)?;
        let column = p.column();
        let path = match p.next() {
            Some(Token::Ident(name)) => p.path(&name, column)?,
            _ => return Err(p.error_at(column, "expected a path such as result.content[0].text")),
        };
        p.finish()?;
        Ok(path)
    }

    /// The value the path names, when there is one.
    pub fn lookup<'a>(&self, scope: &Scope<'a>) -> Option<&'a Value> {
        let (mut v, rest) = match self.root {
            Root::Var => (scope.vars.get(self.var_name()?)?, &self.segments[1..]),
            Root::Result => (scope.answer?.get("result")?, &self.segments[..]),
            Root::Error => (scope.answer?.get("error")?, &self.segments[..]),
        };
        for s in rest {
            v = match s {
                Segment::Key(k) => v.as_object()?.get(k)?,
                Segment::Index(i) => v.as_array()?.get(*i)?,
            };
        }
        Some(v)
    }

    /// The variable a `var.NAME…` path reads.
    pub fn var_name(&self) -> Option<&str> {
        match (self.root, self.segments.first()) {
            (Root::Var, Some(Segment::Key(k))) => Some(k),
            _ => None,
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.root.name())?;
        for s in &self.segments {
            match s {
                Segment::Key(k) if is_identifier(k) => write!(f, ".{k}")?,
                Segment::Key(k) => {
                    // Quoted with the escapes this language reads back.
                    f.write_str("[\"")?;
                    for c in k.chars() {
                        match c {
                            '\\' => f.write_str("\\\\")?,
                            '"' => f.write_str("\\\"")?,
                            '\n' => f.write_str("\\n")?,
                            '\t' => f.write_str("\\t")?,
                            c => write!(f, "{c}")?,
                        }
                    }
                    f.write_str("\"]")?;
                }
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// Whether `text` is a name: a letter or `_`, then letters, digits, `_`.
pub fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A parsed expression, with the text it came from (for reports).
#[derive(Clone, Debug)]
pub struct Expr {
    source: String,
    root: Node,
}

#[derive(Clone, Debug)]
enum Node {
    Lit(Value),
    Path(Path),
    List(Vec<Node>),
    Not(Box<Node>),
    Neg(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    Call(Func, Box<Node>),
}

/// A function of one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Func {
    /// The number of members of a list or an object, of characters of a text.
    Len,
    /// A list's members, each once (the first of those equal), in order.
    Distinct,
}

impl Func {
    const ALL: [(&'static str, Func); 2] = [("len", Func::Len), ("distinct", Func::Distinct)];

    fn named(name: &str) -> Option<Func> {
        Func::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    fn apply(self, v: &Value) -> Result<Value, EvalError> {
        match (self, v) {
            (Func::Len, Value::Array(a)) => Ok(a.len().into()),
            (Func::Len, Value::Object(m)) => Ok(m.len().into()),
            (Func::Len, Value::String(s)) => Ok(s.chars().count().into()),
            (Func::Distinct, Value::Array(a)) => {
                let mut out: Vec<Value> = Vec::new();
                for x in a {
                    if !out.iter().any(|y| json_eq(x, y)) {
                        out.push(x.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            (Func::Len, other) => fail(format!(
                "`len` needs a list, an object or a text, got {}",
                describe(other)
            )),
            (Func::Distinct, other) => {
                fail(format!("`distinct` needs a list, got {}", describe(other)))
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::In => "in",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

impl Expr {
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut p = Parser::new(text)?;
        let root = p.or()?;
        p.finish()?;
        Ok(Expr {
            source: text.to_owned(),
            root,
        })
    }

    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn eval(&self, scope: &Scope<'_>) -> Result<Value, EvalError> {
        eval(&self.root, scope).map(Cow::into_owned)
    }

    /// Evaluates a condition: anything but `true` or `false` is an error.
    pub fn holds(&self, scope: &Scope<'_>) -> Result<bool, EvalError> {
        match eval(&self.root, scope)?.as_ref() {
            Value::Bool(b) => Ok(*b),
            other => fail(format!(
                "the condition gave {}, not true or false",
                describe(other)
            )),
        }
    }

    /// The names of the variables it reads (`var.NAME`), in order of appearance, each once.
    pub fn var_names(&self) -> Vec<&str> {
        fn walk<'a>(n: &'a Node, out: &mut Vec<&'a str>) {
            match n {
                Node::Lit(_) => {}
                Node::Path(p) => {
                    if let Some(v) = p.var_name()
                        && !out.contains(&v)
                    {
                        out.push(v);
                    }
                }
                Node::List(items) => items.iter().for_each(|i| walk(i, out)),
                Node::Not(a) | Node::Neg(a) | Node::Call(_, a) => walk(a, out),
                Node::And(a, b) | Node::Or(a, b) | Node::Binary(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

// ---- tokens ----

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Num(Value),
    Str(String),
    Ident(String),
    Punct(&'static str),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Num(n) => write!(f, "{n}"),
            Token::Str(s) => write!(f, "{}", Value::from(s.as_str())),
            Token::Ident(s) => f.write_str(s),
            Token::Punct(p) => f.write_str(p),
        }
    }
}

const PUNCTS: [&str; 16] = [
    "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "(", ")", "[", "]", ",", ".",
];

/// Splits a text into tokens, each with its 1-based column.
fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, ExprError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let err = |column: usize, message: String| ExprError { column, message };
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            if i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit() {
                float = true;
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < chars.len() && matches!(chars[i], 'e' | 'E') {
                let mut j = i + 1;
                if j < chars.len() && matches!(chars[j], '+' | '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    float = true;
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let literal: String = chars[start..i].iter().collect();
            let number = match literal.parse::<i64>() {
                Ok(n) if !float => Some(Number::from(n)),
                _ => literal
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(Number::from_f64),
            };
            match number {
                Some(n) => out.push((Token::Num(Value::Number(n)), column)),
                None => return Err(err(column, format!("number {literal} is too large"))),
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((Token::Ident(chars[start..i].iter().collect()), column));
        } else if c == '\'' || c == '"' {
            i += 1;
            let mut s = String::new();
            loop {
                let Some(&ch) = chars.get(i) else {
                    return Err(err(column, format!("string without its closing {c}")));
                };
                i += 1;
                if ch == c {
                    break;
                }
                if ch != '\\' {
                    s.push(ch);
                    continue;
                }
                let escaped = match chars.get(i) {
                    Some('\\') => '\\',
                    Some('\'') => '\'',
                    Some('"') => '"',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    _ => {
                        return Err(err(
                            i,
                            "unknown escape; write \\\\, \\', \\\", \\n or \\t".into(),
                        ));
                    }
                };
                s.push(escaped);
                i += 1;
            }
            out.push((Token::Str(s), column));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) else {
                let hint = match c {
                    '=' => "; compare with ==",
                    '&' | '|' | '!' => "; write and, or, not",
                    _ => "",
                };
                return Err(err(column, format!("unexpected character {c:?}{hint}")));
            };
            out.push((Token::Punct(p), column));
            i += p.len();
        }
    }
    Ok(out)
}

/// The comparison (or `in`) a token stands for.
fn comparison_op(t: &Token) -> Option<BinOp> {
    Some(match t {
        Token::Punct("==") => BinOp::Eq,
        Token::Punct("!=") => BinOp::Ne,
        Token::Punct("<") => BinOp::Lt,
        Token::Punct("<=") => BinOp::Le,
        Token::Punct(">") => BinOp::Gt,
        Token::Punct(">=") => BinOp::Ge,
        Token::Ident(w) if w == "in" => BinOp::In,
        _ => return None,
    })
}

// ---- parser: or < and < not < comparison / in < + - < * / < unary - < primary ----

struct Parser {
    tokens: Vec<(Token, usize)>,
    at: usize,
    /// Column just past the text, for "ended early" errors.
    end: usize,
    depth: usize,
    nodes: usize,
}

impl Parser {
    fn new(text: &str) -> Result<Self, ExprError> {
        Ok(Parser {
            tokens: tokenize(text)?,
            at: 0,
            end: text.chars().count() + 1,
            depth: 0,
            nodes: 0,
        })
    }

    fn column(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |t| t.1)
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|t| &t.0)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).map(|t| t.0.clone());
        self.at += 1;
        t
    }

    fn error_at(&self, column: usize, message: impl Into<String>) -> ExprError {
        ExprError {
            column,
            message: message.into(),
        }
    }

    /// An error at the current token, naming it.
    fn unexpected(&self, wanted: &str) -> ExprError {
        let found = match self.peek() {
            Some(t) => format!("found `{t}`"),
            None => "the text ended".into(),
        };
        self.error_at(self.column(), format!("expected {wanted}, {found}"))
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Token::Punct(q)) if *q == p) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Token::Ident(q)) if q == w) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn finish(&self) -> Result<(), ExprError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.unexpected("an operator or the end")),
        }
    }

    /// Runs `f` one level deeper, refusing past [`MAX_DEPTH`].
    fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, ExprError>,
    ) -> Result<T, ExprError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error_at(
                self.column(),
                format!("the expression nests more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    /// Counts one more part, refusing past [`MAX_NODES`].
    fn node(&mut self, n: Node) -> Result<Node, ExprError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error_at(
                self.column(),
                format!("the expression has more than {MAX_NODES} parts; split it"),
            ));
        }
        Ok(n)
    }

    fn or(&mut self) -> Result<Node, ExprError> {
        self.nested(|p| {
            let mut a = p.and()?;
            while p.eat_word("or") {
                let b = p.and()?;
                a = p.node(Node::Or(Box::new(a), Box::new(b)))?;
            }
            Ok(a)
        })
    }

    fn and(&mut self) -> Result<Node, ExprError> {
        let mut a = self.not()?;
        while self.eat_word("and") {
            let b = self.not()?;
            a = self.node(Node::And(Box::new(a), Box::new(b)))?;
        }
        Ok(a)
    }

    fn not(&mut self) -> Result<Node, ExprError> {
        if self.eat_word("not") {
            let inner = self.nested(Self::not)?;
            return self.node(Node::Not(Box::new(inner)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Node, ExprError> {
        let a = self.additive()?;
        let Some(op) = self.peek().and_then(comparison_op) else {
            return Ok(a);
        };
        self.at += 1;
        let b = self.additive()?;
        if self.peek().and_then(comparison_op).is_some() {
            return Err(self.error_at(
                self.column(),
                "comparisons do not chain; join them with `and`",
            ));
        }
        self.node(Node::Binary(op, Box::new(a), Box::new(b)))
    }

    fn additive(&mut self) -> Result<Node, ExprError> {
        let mut a = self.multiplicative()?;
        loop {
            let op = if self.eat_punct("+") {
                BinOp::Add
            } else if self.eat_punct("-") {
                BinOp::Sub
            } else {
                break;
            };
            let b = self.multiplicative()?;
            a = self.node(Node::Binary(op, Box::new(a), Box::new(b)))?;
        }
        Ok(a)
    }

    fn multiplicative(&mut self) -> Result<Node, ExprError> {
        let mut a = self.unary()?;
        loop {
            let op = if self.eat_punct("*") {
                BinOp::Mul
            } else if self.eat_punct("/") {
                BinOp::Div
            } else {
                break;
            };
            let b = self.unary()?;
            a = self.node(Node::Binary(op, Box::new(a), Box::new(b)))?;
        }
        Ok(a)
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        if self.eat_punct("-") {
            let inner = self.nested(Self::unary)?;
            return self.node(Node::Neg(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Node, ExprError> {
        let column = self.column();
        let node = match self.next() {
            Some(Token::Num(n)) => Ok(Node::Lit(n)),
            Some(Token::Str(s)) => Ok(Node::Lit(Value::String(s))),
            Some(Token::Punct("(")) => {
                let inner = self.or()?;
                if !self.eat_punct(")") {
                    return Err(self.unexpected("`)`"));
                }
                Ok(inner)
            }
            Some(Token::Punct("[")) => self.nested(|p| {
                let mut items = Vec::new();
                if !p.eat_punct("]") {
                    loop {
                        items.push(p.or()?);
                        if p.eat_punct("]") {
                            break;
                        }
                        if !p.eat_punct(",") {
                            return Err(p.unexpected("`,` or `]`"));
                        }
                    }
                }
                // A list of literals is itself a literal, built here once, not on each
                // evaluation (`state in ['done', 'failed']` runs on every poll answer).
                let literals: Option<Vec<Value>> = items
                    .iter()
                    .map(|i| match i {
                        Node::Lit(v) => Some(v.clone()),
                        _ => None,
                    })
                    .collect();
                Ok(literals.map_or(Node::List(items), |l| Node::Lit(Value::Array(l))))
            }),
            Some(Token::Ident(w)) => match w.as_str() {
                "true" => Ok(Node::Lit(Value::Bool(true))),
                "false" => Ok(Node::Lit(Value::Bool(false))),
                "null" => Ok(Node::Lit(Value::Null)),
                _ if self.peek() == Some(&Token::Punct("(")) => {
                    let Some(f) = Func::named(&w) else {
                        let names: Vec<&str> = Func::ALL.iter().map(|(n, _)| *n).collect();
                        return Err(self.error_at(
                            column,
                            format!("unknown function `{w}` (functions: {})", names.join(", ")),
                        ));
                    };
                    self.at += 1;
                    let arg = self.nested(Self::or)?;
                    if !self.eat_punct(")") {
                        return Err(self.unexpected("`)`"));
                    }
                    Ok(Node::Call(f, Box::new(arg)))
                }
                _ => self.path(&w, column).map(Node::Path),
            },
            _ => {
                self.at -= 1;
                Err(self.unexpected("a value, a path or `(`"))
            }
        }?;
        self.node(node)
    }

    /// The rest of a path whose root word `root` (at `column`) was just read.
    fn path(&mut self, root: &str, column: usize) -> Result<Path, ExprError> {
        let root = match root {
            "var" => Root::Var,
            "result" => Root::Result,
            "error" => Root::Error,
            _ => {
                return Err(self.error_at(
                    column,
                    format!(
                        "unknown name `{root}`: a path starts with `var`, `result` or `error`, \
                         and a text is quoted ('{root}')"
                    ),
                ));
            }
        };
        let mut segments = Vec::new();
        loop {
            if self.eat_punct(".") {
                match self.next() {
                    Some(Token::Ident(k)) => segments.push(Segment::Key(k)),
                    _ => {
                        self.at -= 1;
                        return Err(self.unexpected("a name after `.`"));
                    }
                }
            } else if self.eat_punct("[") {
                let at = self.column();
                match self.next() {
                    Some(Token::Str(k)) => segments.push(Segment::Key(k)),
                    Some(Token::Num(Value::Number(n))) if n.as_u64().is_some() => {
                        let i = n.as_u64().and_then(|i| usize::try_from(i).ok());
                        segments.push(Segment::Index(i.unwrap_or(usize::MAX)));
                    }
                    _ => {
                        return Err(self.error_at(
                            at,
                            "an index is a whole number of 0 or more, or a quoted key",
                        ));
                    }
                }
                if !self.eat_punct("]") {
                    return Err(self.unexpected("`]`"));
                }
            } else {
                break;
            }
        }
        if root == Root::Var && !matches!(segments.first(), Some(Segment::Key(_))) {
            return Err(self.error_at(column, "`var` needs a name: var.NAME"));
        }
        Ok(Path { root, segments })
    }
}

// ---- evaluation ----

fn eval<'a>(n: &'a Node, scope: &Scope<'a>) -> Result<Cow<'a, Value>, EvalError> {
    match n {
        Node::Lit(v) => Ok(Cow::Borrowed(v)),
        Node::Path(p) => match p.lookup(scope) {
            Some(v) => Ok(Cow::Borrowed(v)),
            None if p.root != Root::Var && scope.answer.is_none() => {
                fail(format!("path {p} is not found: there is no answer here"))
            }
            None => fail(format!("path {p} is not found")),
        },
        Node::List(items) => Ok(Cow::Owned(Value::Array(
            items
                .iter()
                .map(|i| eval(i, scope).map(Cow::into_owned))
                .collect::<Result<_, _>>()?,
        ))),
        Node::Not(a) => match eval(a, scope)?.as_ref() {
            Value::Bool(b) => Ok(Cow::Owned(Value::Bool(!b))),
            other => fail(format!(
                "`not` needs true or false, got {}",
                describe(other)
            )),
        },
        Node::Neg(a) => match eval(a, scope)?.as_ref() {
            Value::Number(x) => Ok(Cow::Owned(arithmetic(BinOp::Sub, &Number::from(0), x)?)),
            other => fail(format!("cannot negate {}", describe(other))),
        },
        Node::And(a, b) => logic("and", false, a, b, scope),
        Node::Or(a, b) => logic("or", true, a, b, scope),
        Node::Binary(op, a, b) => {
            let (x, y) = (eval(a, scope)?, eval(b, scope)?);
            binary(*op, &x, &y).map(Cow::Owned)
        }
        Node::Call(f, a) => f.apply(eval(a, scope)?.as_ref()).map(Cow::Owned),
    }
}

/// `and` (`decisive` false) or `or` (`decisive` true), short-circuit: `error.code == 1 or
/// result.x == 2` reads only what it needs.
fn logic<'a>(
    word: &str,
    decisive: bool,
    a: &'a Node,
    b: &'a Node,
    scope: &Scope<'a>,
) -> Result<Cow<'a, Value>, EvalError> {
    let side = |v: &Value| match v {
        Value::Bool(b) => Ok(*b),
        other => fail(format!(
            "`{word}` needs true or false on both sides, got {}",
            describe(other)
        )),
    };
    let left = side(eval(a, scope)?.as_ref())?;
    if left == decisive {
        return Ok(Cow::Owned(Value::Bool(left)));
    }
    Ok(Cow::Owned(Value::Bool(side(eval(b, scope)?.as_ref())?)))
}

fn binary(op: BinOp, x: &Value, y: &Value) -> Result<Value, EvalError> {
    Ok(match op {
        BinOp::Eq => Value::Bool(json_eq(x, y)),
        BinOp::Ne => Value::Bool(!json_eq(x, y)),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let order = match (x, y) {
                (Value::Number(a), Value::Number(b)) => as_f64(a).partial_cmp(&as_f64(b)),
                (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
                _ => {
                    return fail(format!(
                        "cannot compare {} with {} using {}",
                        describe(x),
                        describe(y),
                        op.symbol()
                    ));
                }
            };
            let Some(o) = order else {
                return fail("cannot compare numbers that are not finite");
            };
            Value::Bool(match op {
                BinOp::Lt => o.is_lt(),
                BinOp::Le => o.is_le(),
                BinOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            })
        }
        BinOp::In => Value::Bool(match (x, y) {
            (_, Value::Array(items)) => items.iter().any(|i| json_eq(x, i)),
            (Value::String(needle), Value::String(hay)) => hay.contains(needle.as_str()),
            (Value::String(key), Value::Object(o)) => o.contains_key(key),
            _ => {
                return fail(format!(
                    "`in` needs a list (or a text, or an object's keys) on its right, got {} in {}",
                    describe(x),
                    describe(y)
                ));
            }
        }),
        BinOp::Add => match (x, y) {
            (Value::Number(a), Value::Number(b)) => arithmetic(op, a, b)?,
            (Value::String(a), Value::String(b)) => Value::String(format!("{a}{b}")),
            _ => return fail(format!("cannot add {} and {}", kind(x), kind(y))),
        },
        BinOp::Sub | BinOp::Mul | BinOp::Div => match (x, y) {
            (Value::Number(a), Value::Number(b)) => arithmetic(op, a, b)?,
            _ => {
                let verb = match op {
                    BinOp::Sub => "subtract",
                    BinOp::Mul => "multiply",
                    _ => "divide",
                };
                return fail(format!("cannot {verb} {} and {}", kind(x), kind(y)));
            }
        },
    })
}

/// `+ - * /` on numbers: exact on integers while they fit, else in floating point; a result
/// that is not finite (division by zero, overflow) is an error.
fn arithmetic(op: BinOp, a: &Number, b: &Number) -> Result<Value, EvalError> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        let exact = match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            _ => (y != 0 && x.checked_rem(y) == Some(0))
                .then(|| x.checked_div(y))
                .flatten(),
        };
        if let Some(n) = exact {
            return Ok(Value::from(n));
        }
    }
    let (x, y) = (as_f64(a), as_f64(b));
    if op == BinOp::Div && y == 0.0 {
        return fail("division by zero");
    }
    let r = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        _ => x / y,
    };
    match Number::from_f64(r).filter(|_| r.is_finite()) {
        Some(n) => Ok(Value::Number(n)),
        None => fail(format!("{x} {} {y} is too large a number", op.symbol())),
    }
}

fn as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// JSON equality, numbers compared by value (`1 == 1.0`). Bounded by the depth of the
/// values, which serde_json bounds when it parses an answer.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(i), Some(j)) => i == j,
                _ => as_f64(x) == as_f64(y),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(i, j)| json_eq(i, j))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// `string`, `number`, … for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value's kind and (short) text, for messages: `a string "done"`.
fn describe(v: &Value) -> String {
    let text = v.to_string();
    let text = match text.char_indices().nth(40) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    };
    match v {
        Value::Null => "null".into(),
        _ => format!("{} {text}", kind(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(text: &str, vars: Value, answer: Value) -> Result<Value, EvalError> {
        let vars = vars.as_object().cloned().unwrap_or_default();
        let scope = Scope {
            vars: &vars,
            answer: Some(&answer),
        };
        Expr::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .eval(&scope)
    }

    fn val(text: &str) -> Value {
        run(text, json!({}), json!({"result": {}})).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn paths_reach_into_the_answer_and_the_variables() {
        let answer = json!({"result": {
            "structuredContent": {"job_id": "j1", "state": "succeeded", "odd key": 7},
            "content": [{"type": "text", "text": "hello"}]
        }});
        let vars = json!({"n": 3, "s": "x"});
        let get = |t| run(t, vars.clone(), answer.clone()).unwrap();
        assert_eq!(get("result.structuredContent.job_id"), "j1");
        assert_eq!(get("result.content[0].text"), "hello");
        assert_eq!(get("result.structuredContent[\"odd key\"]"), 7);
        assert_eq!(get("var.n * 2"), 6);
        assert_eq!(
            get("result.structuredContent.state in ['succeeded','partial','failed']"),
            true
        );
        let e = run(
            "result.structuredContent.nope",
            vars.clone(),
            answer.clone(),
        )
        .unwrap_err();
        assert_eq!(e.message, "path result.structuredContent.nope is not found");
        assert!(
            run("error.code", vars, answer)
                .unwrap_err()
                .message
                .contains("error.code")
        );
    }

    #[test]
    fn operators_follow_the_usual_precedence() {
        assert_eq!(val("1 + 2 * 3"), 7);
        assert_eq!(val("(1 + 2) * 3"), 9);
        assert_eq!(val("10 - 4 - 3"), 3);
        assert_eq!(val("7 / 2"), 3.5);
        assert_eq!(val("8 / 2"), 4);
        assert_eq!(val("-2 * -3"), 6);
        assert_eq!(val("1 == 1.0"), true);
        assert_eq!(val("[1, 2] == [1.0, 2]"), true);
        assert_eq!(val("'a' + \"b\" == 'ab'"), true);
        assert_eq!(val("not 1 > 2 and 2 >= 2 or false"), true);
        assert_eq!(val("true or false and false"), true);
        assert_eq!(val("'ell' in 'hello'"), true);
        assert_eq!(val("3 in [1, 2]"), false);
        assert_eq!(val("'b' < 'c'"), true);
        assert_eq!(val("null == null"), true);
        assert_eq!(val("1e3 == 1000"), true);
    }

    #[test]
    fn evaluation_errors_say_what_failed() {
        let msg = |t: &str| {
            run(t, json!({}), json!({"result": {}}))
                .unwrap_err()
                .message
        };
        assert_eq!(msg("'a' + 1"), "cannot add a string and a number");
        assert_eq!(msg("1 / 0"), "division by zero");
        assert_eq!(msg("1.5 / 0"), "division by zero");
        assert!(msg("1e308 * 10").contains("too large"));
        assert!(msg("9223372036854775807 * 9223372036854775807 * 1e300").contains("too large"));
        assert!(msg("1 and true").contains("`and` needs true or false"));
        assert!(msg("1 < 'a'").contains("cannot compare"));
        assert!(msg("1 in 2").contains("`in` needs a list"));
        let e = Expr::parse("1 + 1").unwrap();
        let vars = Map::new();
        let scope = Scope {
            vars: &vars,
            answer: None,
        };
        assert!(e.holds(&scope).unwrap_err().message.contains("a number 2"));
        assert!(
            Expr::parse("result.x")
                .unwrap()
                .eval(&scope)
                .unwrap_err()
                .message
                .contains("no answer")
        );
        // Short-circuit: the right side is never read.
        assert_eq!(
            Expr::parse("false and result.x").unwrap().holds(&scope),
            Ok(false)
        );
    }

    #[test]
    fn parse_errors_point_at_a_column() {
        let err = |t: &str| Expr::parse(t).unwrap_err();
        assert_eq!(err("result.x = 1").column, 10);
        assert!(err("result.x = 1").message.contains("=="));
        assert_eq!(err("job_id == 1").column, 1);
        assert!(err("job_id == 1").message.contains("unknown name `job_id`"));
        assert_eq!(err("1 +").column, 4);
        assert_eq!(err("(1").column, 3);
        assert_eq!(err("'abc").column, 1);
        assert_eq!(err("1 < 2 < 3").column, 7);
        assert_eq!(err("var == 1").column, 1);
        assert_eq!(err("result[-1]").column, 8);
        assert_eq!(err("é é").column, 1);
        assert_eq!(err("'é' x").column, 5);
        assert!(
            err("99999999999999999999e999")
                .message
                .contains("too large")
        );
        assert!(Expr::parse("").is_err());
        assert!(Path::parse("result.a + 1").is_err());
        assert!(Path::parse("1").is_err());
    }

    #[test]
    fn len_and_distinct_count_members() {
        let vars = json!({"ids": ["j1", "j2", "j1", 1, 1.0], "m": {"a": 1}, "t": "héllo"});
        let get = |t: &str| run(t, vars.clone(), json!({"result": {}}));
        assert_eq!(get("len(var.ids)").unwrap(), 5);
        assert_eq!(get("distinct(var.ids)").unwrap(), json!(["j1", "j2", 1]));
        assert_eq!(get("len(distinct(var.ids)) - 1").unwrap(), 2);
        assert_eq!(get("len(var.m) + len(var.t)").unwrap(), 6);
        assert!(get("len(1)").unwrap_err().message.contains("`len` needs"));
        assert!(
            get("distinct('ab')")
                .unwrap_err()
                .message
                .contains("a string")
        );
        let e = Expr::parse("count(var.ids)").unwrap_err();
        assert_eq!(e.column, 1);
        assert!(e.message.contains("unknown function `count`"), "{e}");
        assert!(Expr::parse("len(var.ids").is_err());
        assert_eq!(
            Expr::parse("len(distinct(var.a)) == var.b")
                .unwrap()
                .var_names(),
            vec!["a", "b"]
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(Expr::parse(&deep).unwrap_err().message.contains("nests"));
        let long = vec!["1"; 10_000].join(" + ");
        assert!(Expr::parse(&long).unwrap_err().message.contains("parts"));
        assert!(Expr::parse(&"not ".repeat(10_000)).is_err());
        assert!(Expr::parse(&"-".repeat(10_000)).is_err());
        assert!(Expr::parse(&"[".repeat(10_000)).is_err());
        let fine = vec!["1"; 40].join(" + ");
        assert_eq!(val(&fine), 40);
    }

    #[test]
    fn paths_print_and_name_their_variables() {
        let p = Path::parse(" result.content[0][\"a b\"].text ").unwrap();
        assert_eq!(p.to_string(), "result.content[0][\"a b\"].text");
        // A key of any characters prints as a path that reads back the same.
        let odd = Path {
            root: Root::Result,
            segments: vec![Segment::Key("\u{0}\"\\\n\t'x é".into()), Segment::Index(3)],
        };
        assert_eq!(Path::parse(&odd.to_string()).unwrap(), odd);
        assert_eq!(
            Path::parse("var.job_id").unwrap().var_name(),
            Some("job_id")
        );
        let e = Expr::parse("var.a + var.b == var.a and result.in == 1").unwrap();
        assert_eq!(e.var_names(), vec!["a", "b"]);
        assert_eq!(e.to_string(), "var.a + var.b == var.a and result.in == 1");
    }
}
