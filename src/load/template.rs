//! Request templates: text with `{{seq}}`, `{{worker}}`, `{{uuid}}`, `{{rand:A..B}}`,
//! `{{csv:COLUMN}}` and `{{var.NAME}}` holes (their syntax is the profile's, [`crate::profile::template`]),
//! compiled once into literal bytes and holes so that rendering a request is a few copies and
//! integer formats, never a parse.

use crate::jsonrpc::Id;
use crate::profile::template::{Hole, Piece, parse};
use serde_json::{Map, Value};
use std::io::Write as _;

/// A JSON text with holes, compiled once.
#[derive(Clone, Debug)]
pub struct JsonTemplate {
    parts: Vec<Part>,
}

#[derive(Clone, Debug)]
enum Part {
    Lit(Box<[u8]>),
    /// A hole, inside a JSON string or in place of a whole string value.
    Hole(Hole, Place),
    /// The request's own id, as a JSON value (its progress token).
    RequestId,
}

/// Where a hole's value lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Inside a JSON string: escaped, without quotes.
    InString,
    /// In place of a whole string value: a JSON value of its own (a number, or a variable's
    /// value).
    Whole,
    /// In plain text (a uri): as it is.
    Text,
}

/// What a rendering needs besides the template.
pub struct Ctx<'a> {
    /// The request's id.
    pub id: &'a Id,
    pub seq: u64,
    pub worker: u32,
    pub rng: &'a mut Rng,
    /// The current CSV row, looked up by column name.
    pub csv: Option<&'a CsvRow<'a>>,
    /// A scenario iteration's captured variables, for `{{var.NAME}}`.
    pub vars: Option<&'a Map<String, Value>>,
}

/// A CSV row and its header.
pub struct CsvRow<'a> {
    pub header: &'a [String],
    pub row: &'a [String],
}

impl JsonTemplate {
    /// Compiles a JSON value whose strings may hold holes.
    pub fn new(value: &serde_json::Value) -> Result<Self, String> {
        let mut pieces = parse(&value.to_string())?;
        // `"{{seq}}"` (a whole string value) becomes a number: drop the quotes around it.
        let mut parts = Vec::with_capacity(pieces.len());
        for i in 0..pieces.len() {
            let whole = matches!(&pieces[i], Piece::Hole(h) if h.fills_whole_value())
                && matches!(pieces.get(i.wrapping_sub(1)), Some(Piece::Lit(l)) if l.ends_with('"') && !l.ends_with("\\\""))
                // A value, not an object key: the closing quote is not followed by `:`.
                && matches!(pieces.get(i + 1), Some(Piece::Lit(l)) if l.starts_with('"') && !l[1..].starts_with(':'));
            if whole {
                if let Some(Part::Lit(prev)) = parts.last_mut() {
                    *prev = prev[..prev.len() - 1].into();
                }
                if let Piece::Lit(next) = &mut pieces[i + 1] {
                    next.remove(0);
                }
            }
            parts.push(match &pieces[i] {
                Piece::Lit(l) => Part::Lit(l.as_bytes().into()),
                Piece::Hole(h) if whole => Part::Hole(h.clone(), Place::Whole),
                Piece::Hole(h) => Part::Hole(h.clone(), Place::InString),
            });
        }
        parts.retain(|p| !matches!(p, Part::Lit(b) if b.is_empty()));
        Ok(JsonTemplate { parts })
    }

    /// A JSON value taken as it is: `{{` in it is text, not a placeholder (for values the
    /// server supplied, such as schema defaults).
    pub fn literal(value: &serde_json::Value) -> Self {
        JsonTemplate {
            parts: vec![Part::Lit(value.to_string().into_bytes().into())],
        }
    }

    /// The template with every string value that is exactly `mark` made a hole for the
    /// request's id (a JSON number or string): how a progress token is put in.
    pub fn with_request_id_at(self, mark: &str) -> Self {
        let quoted = Value::from(mark).to_string();
        let mut parts = Vec::with_capacity(self.parts.len() + 2);
        for p in self.parts {
            let Part::Lit(lit) = p else {
                parts.push(p);
                continue;
            };
            let mut rest = &lit[..];
            while let Some(i) = memchr::memmem::find(rest, quoted.as_bytes()) {
                parts.push(Part::Lit(rest[..i].into()));
                parts.push(Part::RequestId);
                rest = &rest[i + quoted.len()..];
            }
            parts.push(Part::Lit(rest.into()));
        }
        parts.retain(|p| !matches!(p, Part::Lit(b) if b.is_empty()));
        JsonTemplate { parts }
    }

    /// The holes that read CSV columns.
    pub fn csv_columns(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Hole(Hole::Csv(c), _) => Some(c.as_str()),
            _ => None,
        })
    }

    /// Appends the rendered JSON to `out`.
    pub fn render(&self, out: &mut Vec<u8>, ctx: &mut Ctx<'_>) {
        for p in &self.parts {
            match p {
                Part::Lit(b) => out.extend_from_slice(b),
                Part::Hole(h, place) => render_hole(out, h, ctx, *place),
                // Writing JSON into a Vec cannot fail.
                Part::RequestId => {
                    let _ = serde_json::to_writer(&mut *out, ctx.id);
                }
            }
        }
    }
}

/// A plain text with holes (a resource uri): rendered unescaped.
#[derive(Clone, Debug)]
pub struct TextTemplate {
    pieces: Vec<Piece>,
}

impl TextTemplate {
    pub fn new(text: &str) -> Result<Self, String> {
        Ok(TextTemplate {
            pieces: parse(text)?,
        })
    }

    /// The holes that read CSV columns.
    pub fn csv_columns(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Hole(Hole::Csv(c)) => Some(c.as_str()),
            _ => None,
        })
    }

    /// Appends the rendered text to `out`.
    pub fn render(&self, out: &mut Vec<u8>, ctx: &mut Ctx<'_>) {
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.extend_from_slice(l.as_bytes()),
                Piece::Hole(h) => render_hole(out, h, ctx, Place::Text),
            }
        }
    }
}

/// Writes a hole's value as `place` needs it.
fn render_hole(out: &mut Vec<u8>, h: &Hole, ctx: &mut Ctx<'_>, place: Place) {
    let mut num = itoa::Buffer::new();
    match h {
        Hole::Seq => out.extend_from_slice(num.format(ctx.seq).as_bytes()),
        Hole::Worker => out.extend_from_slice(num.format(ctx.worker).as_bytes()),
        Hole::Rand(a, b) => {
            let span = (*b as i128 - *a as i128 + 1) as u128;
            let v = *a as i128 + (ctx.rng.next_u64() as u128 % span) as i128;
            out.extend_from_slice(num.format(v as i64).as_bytes());
        }
        Hole::Uuid => {
            let (hi, lo) = (ctx.rng.next_u64(), ctx.rng.next_u64());
            let hi = (hi & !0xF000) | 0x4000; // version 4
            let lo = (lo & !(0xC << 60)) | (0x8 << 60); // RFC 4122 variant
            // Writing into a Vec cannot fail.
            let _ = write!(
                out,
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                hi >> 32,
                (hi >> 16) & 0xFFFF,
                hi & 0xFFFF,
                lo >> 48,
                lo & 0xFFFF_FFFF_FFFF
            );
        }
        Hole::Csv(col) => {
            let value = ctx.csv.and_then(|r| {
                let i = r.header.iter().position(|h| h == col)?;
                r.row.get(i)
            });
            write_text(out, value.map_or("", String::as_str), place);
        }
        Hole::Var(name) => match ctx.vars.and_then(|v| v.get(name)) {
            Some(Value::String(s)) => write_text(out, s, place),
            // A list or an object inside a JSON string: its JSON text, escaped.
            Some(v @ (Value::Array(_) | Value::Object(_))) if place == Place::InString => {
                write_text(out, &v.to_string(), place);
            }
            // Its JSON text, which needs no escapes elsewhere (nor, for a number, true, false
            // or null, inside a string). Writing JSON into a Vec cannot fail.
            Some(v) => {
                let _ = serde_json::to_writer(&mut *out, v);
            }
            // Validation requires a capture before any use; render as empty all the same.
            None => write_text(out, "", place),
        },
    }
}

/// Writes a text: quoted as a whole value, escaped inside a JSON string, as it is in plain text.
fn write_text(out: &mut Vec<u8>, text: &str, place: Place) {
    match place {
        Place::Text => out.extend_from_slice(text.as_bytes()),
        Place::Whole => {
            let _ = serde_json::to_writer(&mut *out, text);
        }
        Place::InString => {
            // Escaped in place: written quoted, then the quotes serde_json adds are dropped.
            let start = out.len();
            let _ = serde_json::to_writer(&mut *out, text);
            out.pop();
            out.remove(start);
        }
    }
}

/// A small, fast generator (xorshift64*): one per worker, seeded; not for secrets.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(t: &JsonTemplate, seq: u64) -> serde_json::Value {
        let mut rng = Rng::new(1);
        let mut out = Vec::new();
        let header = vec!["city".to_owned()];
        let row = vec!["Zürich \"HQ\"".to_owned()];
        let csv = CsvRow {
            header: &header,
            row: &row,
        };
        t.render(
            &mut out,
            &mut Ctx {
                id: &Id::Num(9),
                seq,
                worker: 3,
                rng: &mut rng,
                csv: Some(&csv),
                vars: None,
            },
        );
        serde_json::from_slice(&out)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out)))
    }

    #[test]
    fn holes_render_as_numbers_when_whole_and_as_text_inside_strings() {
        let t = JsonTemplate::new(&json!({
            "n": "{{seq}}", "w": "{{worker}}", "msg": "hi {{seq}} from {{worker}}",
            "r": "{{rand:5..7}}", "id": "{{uuid}}", "city": "{{csv:city}}", "k": "plain"
        }))
        .unwrap();
        let v = render(&t, 42);
        assert_eq!(v["n"], 42);
        assert_eq!(v["w"], 3);
        assert_eq!(v["msg"], "hi 42 from 3");
        assert!((5..=7).contains(&v["r"].as_i64().unwrap()));
        let id = v["id"].as_str().unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert_eq!(v["city"], "Zürich \"HQ\"");
        assert_eq!(v["k"], "plain");
    }

    #[test]
    fn a_numeric_hole_as_an_object_key_stays_a_string() {
        let t = JsonTemplate::new(&json!({"{{seq}}": "{{seq}}"})).unwrap();
        let v = render(&t, 5);
        assert_eq!(v, json!({"5": 5}));
        let lit = JsonTemplate::literal(&json!({"greeting": "Hello {{name}}"}));
        assert_eq!(render(&lit, 1)["greeting"], "Hello {{name}}");
    }

    #[test]
    fn a_request_id_hole_takes_the_place_of_its_mark_alone() {
        let mark = "\u{1}token\u{1}";
        let t = JsonTemplate::new(&json!({
            "n": "{{seq}}", "_meta": {"progressToken": mark, "other": "x"}, "text": "a \u{1}"
        }))
        .unwrap()
        .with_request_id_at(mark);
        let v = render(&t, 4);
        assert_eq!(
            v,
            json!({"n": 4, "_meta": {"progressToken": 9, "other": "x"}, "text": "a \u{1}"})
        );
    }

    #[test]
    fn a_bad_hole_fails_the_compilation() {
        assert!(JsonTemplate::new(&json!({"a": "{{csv:}}"})).is_err());
        assert!(TextTemplate::new("x {{seq").is_err());
    }

    #[test]
    fn variables_render_as_their_json_when_whole_and_as_text_inside_strings() {
        let vars = json!({"id": "j-\"1\"", "n": 20, "ok": true, "obj": {"a": [1]}});
        let vars = vars.as_object().unwrap();
        let t = JsonTemplate::new(&json!({
            "id": "{{var.id}}", "n": "{{var.n}}", "ok": "{{var.ok}}", "obj": "{{var.obj}}",
            "msg": "job {{var.id}} of {{var.n}} {{var.obj}}", "gone": "{{var.gone}}",
            "in": "<{{var.gone}}>"
        }))
        .unwrap();
        let mut rng = Rng::new(1);
        let mut ctx = Ctx {
            id: &Id::Num(0),
            seq: 0,
            worker: 0,
            rng: &mut rng,
            csv: None,
            vars: Some(vars),
        };
        let mut out = Vec::new();
        t.render(&mut out, &mut ctx);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({
                "id": "j-\"1\"", "n": 20, "ok": true, "obj": {"a": [1]},
                "msg": "job j-\"1\" of 20 {\"a\":[1]}", "gone": "", "in": "<>"
            })
        );
        let uri = TextTemplate::new("mem://job/{{var.id}}/{{var.n}}").unwrap();
        out.clear();
        uri.render(&mut out, &mut ctx);
        assert_eq!(out, "mem://job/j-\"1\"/20".as_bytes());
    }

    #[test]
    fn rand_covers_its_range() {
        let t = JsonTemplate::new(&json!("{{rand:1..3}}")).unwrap();
        let mut seen = [false; 3];
        let mut rng = Rng::new(7);
        for seq in 0..200 {
            let mut out = Vec::new();
            t.render(
                &mut out,
                &mut Ctx {
                    id: &Id::Num(0),
                    seq,
                    worker: 0,
                    rng: &mut rng,
                    csv: None,
                    vars: None,
                },
            );
            let n: usize = std::str::from_utf8(&out).unwrap().parse().unwrap();
            seen[n - 1] = true;
        }
        assert_eq!(seen, [true; 3]);
    }
}
