//! The placeholder syntax of templated text in a profile: `{{seq}}`, `{{worker}}`, `{{uuid}}`,
//! `{{rand:A..B}}`, `{{csv:COLUMN}}`, `{{var.NAME}}`. A text splits into literal runs and holes, checked when
//! the profile is read; `load::template` compiles the pieces into request templates.

/// One hole of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hole {
    /// The request's sequence number within the run (0, 1, 2, …).
    Seq,
    /// The worker's index.
    Worker,
    /// A random UUID (version 4 layout).
    Uuid,
    /// A uniform random integer in `A..=B`.
    Rand(i64, i64),
    /// The named column of the current CSV row.
    Csv(String),
    /// A variable a scenario step captured earlier in the iteration.
    Var(String),
}

impl Hole {
    /// Renders as a JSON value of its own when it fills a whole string value: a number for
    /// `seq`, `worker`, `rand`; the variable's JSON value for `var` (a string stays a string).
    pub fn fills_whole_value(&self) -> bool {
        matches!(
            self,
            Hole::Seq | Hole::Worker | Hole::Rand(..) | Hole::Var(_)
        )
    }
}

const VALID: &str = "{{seq}}, {{worker}}, {{uuid}}, {{rand:A..B}}, {{csv:COLUMN}}, {{var.NAME}}";

/// Splits a text into literal runs and holes; an unknown or malformed hole is an error that
/// says what is valid.
pub fn parse(text: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            return Err(format!("`{{{{` without a closing `}}}}` in {text:?}"));
        };
        if start > 0 {
            out.push(Piece::Lit(rest[..start].to_owned()));
        }
        let inner = rest[start + 2..start + len].trim();
        out.push(Piece::Hole(hole(inner)?));
        rest = &rest[start + len + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Lit(rest.to_owned()));
    }
    Ok(out)
}

fn hole(inner: &str) -> Result<Hole, String> {
    match inner {
        "seq" => return Ok(Hole::Seq),
        "worker" => return Ok(Hole::Worker),
        "uuid" => return Ok(Hole::Uuid),
        _ => {}
    }
    if let Some(range) = inner.strip_prefix("rand:") {
        let parsed = range
            .split_once("..")
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
        return match parsed {
            Some((a, b)) if a <= b => Ok(Hole::Rand(a, b)),
            _ => Err(format!(
                "`{{{{{inner}}}}}`: a random range is `{{{{rand:A..B}}}}` with integers A <= B"
            )),
        };
    }
    if let Some(col) = inner.strip_prefix("csv:")
        && !col.trim().is_empty()
    {
        return Ok(Hole::Csv(col.trim().to_owned()));
    }
    if let Some(name) = inner.strip_prefix("var.") {
        let name = name.trim();
        return if crate::profile::expr::is_identifier(name) {
            Ok(Hole::Var(name.to_owned()))
        } else {
            Err(format!(
                "`{{{{{inner}}}}}`: a variable is `{{{{var.NAME}}}}`, NAME made of letters, digits and _"
            ))
        };
    }
    Err(format!(
        "unknown placeholder `{{{{{inner}}}}}`; valid: {VALID}"
    ))
}

/// A literal run or a hole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Lit(String),
    Hole(Hole),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_holes_say_what_is_valid() {
        assert!(parse("{{nope}}").unwrap_err().contains("valid: {{seq}}"));
        assert!(parse("{{rand:9..1}}").unwrap_err().contains("A <= B"));
        assert!(parse("{{rand:a..b}}").is_err());
        assert!(parse("x {{seq").unwrap_err().contains("without a closing"));
        assert!(parse("{{csv:}}").is_err());
        assert!(parse("{{var.}}").unwrap_err().contains("{{var.NAME}}"));
        assert!(parse("{{var.a.b}}").is_err());
        assert_eq!(
            parse("id={{ var.job_id }}").unwrap(),
            vec![
                Piece::Lit("id=".into()),
                Piece::Hole(Hole::Var("job_id".into()))
            ]
        );
    }
}
