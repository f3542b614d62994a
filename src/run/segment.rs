//! Which segment of a split run this instance runs and when the segments start, from the
//! command line or the environment: `--segment I/N` or `MCPLOAD_SEGMENT`, else Kubernetes'
//! `JOB_COMPLETION_INDEX` with `--segments N` or `MCPLOAD_SEGMENTS`; `--start-at` or
//! `MCPLOAD_START_AT`. A bad value is an error naming the flag or variable it came from.

use crate::engine::Segment;
use std::time::SystemTime;

/// The flag the segment comes from, or the variable standing in for it.
const SEGMENT_VAR: &str = "MCPLOAD_SEGMENT";
const SEGMENTS_VAR: &str = "MCPLOAD_SEGMENTS";
const INDEX_VAR: &str = "JOB_COMPLETION_INDEX";
const START_AT_VAR: &str = "MCPLOAD_START_AT";

/// A value and where it came from (`--segment 2/4`, `MCPLOAD_SEGMENT=2/4`), for errors.
struct Given {
    text: String,
    from: String,
}

/// The flag's value, else the variable's (an empty variable counts as not set).
fn given(
    flag: Option<&str>,
    flag_name: &str,
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Given> {
    match flag {
        Some(t) => Some(Given {
            text: t.to_owned(),
            from: format!("{flag_name} {t}"),
        }),
        None => env(var).filter(|v| !v.trim().is_empty()).map(|t| Given {
            from: format!("{var}={t}"),
            text: t,
        }),
    }
}

/// The segment this instance runs (the whole run when nothing says otherwise);
/// `JOB_COMPLETION_INDEX` alone (any Indexed Job sets it) does not split a run.
pub fn segment_from(
    segment: Option<&str>,
    segments: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Segment, String> {
    let count = given(segments, "--segments", SEGMENTS_VAR, env)
        .map(|g| {
            g.text
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 1)
                .map(|n| (n, g.from.clone()))
                .ok_or_else(|| format!("{}: the number of segments must be 1 or more", g.from))
        })
        .transpose()?;
    if let Some(g) = given(segment, "--segment", SEGMENT_VAR, env) {
        let seg = parse_segment(&g.text)
            .map_err(|why| format!("{}: {why}; give I/N with 1 <= I <= N, e.g. 2/4", g.from))?;
        if let Some((n, from)) = count
            && n != seg.count
        {
            return Err(format!(
                "{} and {from} disagree on the number of segments",
                g.from
            ));
        }
        return Ok(seg);
    }
    let Some((n, from)) = count else {
        return Ok(Segment::WHOLE);
    };
    let Some(index) = env(INDEX_VAR).filter(|v| !v.trim().is_empty()) else {
        return Err(format!(
            "{from}: which segment is this? Set {INDEX_VAR} (a Kubernetes Indexed Job does), \
             or give --segment I/N instead"
        ));
    };
    index
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|k| *k < n)
        .and_then(|k| Segment::new(k + 1, n))
        .ok_or_else(|| {
            format!(
                "{INDEX_VAR}={index}: with {from} it must be a whole number from 0 to {} \
                 (0-based: segment k+1 of {n})",
                n - 1
            )
        })
}

/// `I/N`, 1-based.
fn parse_segment(text: &str) -> Result<Segment, &'static str> {
    let (i, n) = text.trim().split_once('/').ok_or("not of the form I/N")?;
    let (Ok(i), Ok(n)) = (i.trim().parse::<u32>(), n.trim().parse::<u32>()) else {
        return Err("I and N must be whole numbers");
    };
    if n == 0 {
        return Err("N must be 1 or more");
    }
    Segment::new(i, n).ok_or("I must be from 1 to N (segments count from 1)")
}

/// The common start, `--start-at` or `MCPLOAD_START_AT`, an RFC 3339 time (any offset).
pub fn start_at_from(
    flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SystemTime>, String> {
    let Some(g) = given(flag, "--start-at", START_AT_VAR, env) else {
        return Ok(None);
    };
    let format = time::format_description::well_known::Rfc3339;
    time::OffsetDateTime::parse(g.text.trim(), &format)
        .map(|t| Some(SystemTime::from(t)))
        .map_err(|e| {
            format!(
                "{}: not an RFC 3339 time ({e}); e.g. 2026-12-02T10:00:00Z, or \
                 $(date -u -d '+30 seconds' +%Y-%m-%dT%H:%M:%SZ)",
                g.from
            )
        })
}

/// `t` in RFC 3339 UTC, to the second, the millisecond or the nanosecond, whichever
/// holds it exactly (as a start is usually written).
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let nanos = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    match nanos {
        0 => humantime::format_rfc3339_seconds(t).to_string(),
        n if n % 1_000_000 == 0 => humantime::format_rfc3339_millis(t).to_string(),
        _ => humantime::format_rfc3339_nanos(t).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn seg(i: u32, n: u32) -> Segment {
        Segment::new(i, n).unwrap()
    }

    #[test]
    fn the_flag_then_the_variable_then_the_completion_index() {
        let all = env(&[
            ("MCPLOAD_SEGMENT", "3/4"),
            ("JOB_COMPLETION_INDEX", "0"),
            ("MCPLOAD_SEGMENTS", "4"),
        ]);
        assert_eq!(segment_from(Some("2/4"), None, &all), Ok(seg(2, 4)));
        assert_eq!(segment_from(None, None, &all), Ok(seg(3, 4)));
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3")]);
        assert_eq!(segment_from(None, Some("4"), &k8s), Ok(seg(4, 4)));
        let k8s_env = env(&[("JOB_COMPLETION_INDEX", "0"), ("MCPLOAD_SEGMENTS", "5")]);
        assert_eq!(segment_from(None, None, &k8s_env), Ok(seg(1, 5)));
        // Any Indexed Job sets the index: alone it splits nothing.
        assert_eq!(segment_from(None, None, &k8s), Ok(Segment::WHOLE));
        assert_eq!(
            segment_from(Some("1/1"), None, &env(&[])),
            Ok(Segment::WHOLE)
        );
        // An empty variable is not set.
        let empty = env(&[("MCPLOAD_SEGMENT", "")]);
        assert_eq!(segment_from(None, None, &empty), Ok(Segment::WHOLE));
    }

    #[test]
    fn bad_values_name_their_source_and_what_is_valid() {
        let none = env(&[]);
        for (flag, want) in [
            ("0/4", "--segment 0/4: I must be from 1 to N"),
            ("5/4", "--segment 5/4: I must be from 1 to N"),
            ("2", "--segment 2: not of the form I/N"),
            ("a/4", "--segment a/4: I and N must be whole numbers"),
            ("1/0", "--segment 1/0: N must be 1 or more"),
        ] {
            let e = segment_from(Some(flag), None, &none).unwrap_err();
            assert!(e.starts_with(want), "{e}");
            assert!(e.contains("e.g. 2/4"), "{e}");
        }
        let e = segment_from(None, None, &env(&[("MCPLOAD_SEGMENT", "9/3")])).unwrap_err();
        assert!(e.starts_with("MCPLOAD_SEGMENT=9/3: I must be"), "{e}");
        let e = segment_from(None, Some("4"), &none).unwrap_err();
        assert!(
            e.contains("--segments 4") && e.contains("JOB_COMPLETION_INDEX"),
            "{e}"
        );
        let e = segment_from(None, Some("4"), &env(&[("JOB_COMPLETION_INDEX", "4")])).unwrap_err();
        assert!(
            e.starts_with("JOB_COMPLETION_INDEX=4") && e.contains("0 to 3"),
            "{e}"
        );
        let e = segment_from(None, Some("0"), &none).unwrap_err();
        assert!(
            e.starts_with("--segments 0: the number of segments must be 1"),
            "{e}"
        );
        let e = segment_from(Some("1/4"), Some("3"), &none).unwrap_err();
        assert!(e.contains("disagree"), "{e}");
    }

    #[test]
    fn start_at_is_rfc3339_with_any_offset() {
        let none = env(&[]);
        let utc = start_at_from(Some("2026-12-02T10:00:00Z"), &none).unwrap();
        let offset = start_at_from(Some("2026-12-02T11:00:00.5+01:00"), &none).unwrap();
        assert_eq!(
            offset.unwrap().duration_since(utc.unwrap()).unwrap(),
            Duration::from_millis(500)
        );
        let from_env = env(&[("MCPLOAD_START_AT", "2026-12-02T10:00:00Z")]);
        assert_eq!(start_at_from(None, &from_env).unwrap(), utc);
        assert_eq!(start_at_from(None, &none).unwrap(), None);
        let e = start_at_from(Some("tomorrow"), &none).unwrap_err();
        assert!(
            e.starts_with("--start-at tomorrow: not an RFC 3339 time"),
            "{e}"
        );
        assert_eq!(rfc3339(utc.unwrap()), "2026-12-02T10:00:00Z");
        assert_eq!(rfc3339(offset.unwrap()), "2026-12-02T10:00:00.500Z");
        let e = start_at_from(None, &env(&[("MCPLOAD_START_AT", "12:00")])).unwrap_err();
        assert!(
            e.starts_with("MCPLOAD_START_AT=12:00: not an RFC 3339"),
            "{e}"
        );
    }
}
