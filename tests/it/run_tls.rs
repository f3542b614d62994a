//! `mcpload run` over `https://` against TLS faults, through a TLS front on loopback before
//! `mcpload serve` (docs/metrics.md, "Hostile servers: where each kind lands"): a handshake
//! that stalls, a certificate nobody trusts, a certificate for another name. Met by the
//! connections the load opens, the requests on them end `transport_errors` and the report
//! names the cause; met by the run's handshake, the run stops with an error naming it. Either
//! way the run ends within its time budget.
//!
//! A TCP connect that never completes cannot be made on loopback reliably (the kernel
//! answers at once, or refuses); the connect timeout is tested with the stalled TLS
//! handshake, which it bounds the same way.

use crate::support::machine;
use crate::support::run::{ENDS, Watched, assert_identity, num, steps, summary, watch};
use crate::support::scratch::scratch;
use crate::support::servers::serve;
use crate::support::tls::{Fault, Faulted, TlsFront, tls_front};
use crate::support::{bin, mcpload};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

/// Virtual clients: the handshake's connection serves one, so the load opens three more, each
/// meeting the fault.
const CLIENTS: &str = "4";
/// The connections the load opens at its start, beside the handshake's.
const OPENED_BY_THE_LOAD: f64 = 3.0;
/// The longest a run may take: the handshake, a 2 s step, then a drain of at most the connect
/// timeout (1 s) or the request timeout (1 s where it comes first): about 4 s, three times
/// over for a busy machine. A run stuck on a stalled handshake overruns it by far (the front
/// never answers).
const BUDGET: Duration = Duration::from_secs(15);
/// Peak memory allowed: a debug build runs a 4-client step in 40 to 60 MiB.
const MAX_RSS_MIB: u64 = 100;

/// One step of 4 clients for 2 s over one worker (so no second handshake), no warm-up,
/// against `target` (`SSL_CERT_FILE` trusting `cert`), with `args` added.
fn run_against(target: &str, cert: &Path, out: &Path, args: &[&str]) -> Watched {
    let mut run = bin();
    run.env("SSL_CERT_FILE", cert)
        .args(["run", "--quiet", "--url", target, "--workers", "1"])
        .args(["-c", CLIENTS, "-d", "2s", "--warmup", "0s"])
        .args(["--out", out.to_str().unwrap()])
        .args(args);
    watch(run, BUDGET)
}

/// A front playing `fault` on `faulted` connections before a fresh `mcpload serve`, and the
/// run against it: what the run did, its folder, the front.
struct Played {
    run: Watched,
    out: PathBuf,
    front: TlsFront,
    stdout: String,
    stderr: String,
}

fn play(name: &str, fault: Fault, faulted: Faulted, args: &[&str]) -> Played {
    let _share = machine::loading();
    let target = serve(&[]);
    let dir = scratch(&format!("tls-{name}"));
    let cert = dir.join("trusted.pem");
    let front = tls_front(&target.url, &cert, Some((fault, faulted)));
    let out = dir.join("run");
    let run = run_against(&front.url(), &cert, &out, args);
    let stdout = String::from_utf8_lossy(&run.output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.output.stderr).into_owned();
    eprintln!(
        "{name}: exit {:?} after {:.1} s, peak RSS {} MiB; front: {} connections, {} faulted\n\
         --- stdout\n{stdout}--- stderr\n{stderr}---",
        run.output.status.code(),
        run.elapsed.as_secs_f64(),
        run.peak_rss_kib >> 10,
        front.seen.connections.load(SeqCst),
        front.seen.faulted.load(SeqCst),
    );
    assert!(
        !run.overran && run.elapsed <= BUDGET,
        "{name}: still running after {BUDGET:?}: killed"
    );
    assert!(
        run.peak_rss_kib > 0 && run.peak_rss_kib <= MAX_RSS_MIB << 10,
        "{name}: peak RSS {} MiB, over {MAX_RSS_MIB} MiB",
        run.peak_rss_kib >> 10
    );
    assert!(!stderr.contains("panicked"), "{name}: it panicked");
    Played {
        run,
        out,
        front,
        stdout,
        stderr,
    }
}

/// The fault met by the load: the run completes (exit 0), the faulted requests end as `end`,
/// the others `ok` (the handshake's connection serves on), and nothing else. Returns the step.
fn load_meets(p: &Played, end: &str) -> HashMap<String, String> {
    assert_eq!(p.run.output.status.code(), Some(0), "exit code");
    assert!(
        p.front.seen.faulted.load(SeqCst) as f64 >= OPENED_BY_THE_LOAD,
        "the load did not meet the fault"
    );
    let rows = steps(&p.out);
    assert_eq!(rows.len(), 1);
    let row = rows.into_iter().next().unwrap();
    assert_identity(&row);
    assert!(
        num(&row, end) >= OPENED_BY_THE_LOAD,
        "{end} = {}, want one per connection the load opened at least",
        row[end]
    );
    assert!(
        num(&row, "ok") > 0.0,
        "the handshake's connection served no call"
    );
    for k in ENDS.iter().filter(|k| !["ok", end].contains(k)) {
        assert_eq!(num(&row, k), 0.0, "{k}");
    }
    row
}

/// The report calls out `transport_errors` and names `cause` as the first in step 1; steps.csv
/// holds the same cause.
fn names_the_cause(p: &Played, row: &HashMap<String, String>, cause: &[&str]) {
    let called = format!("  transport_errors {} in step 1: ", row["transport_errors"]);
    assert!(p.stdout.contains(&called), "no callout {called:?}");
    let first = p
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("    first in step 1: "))
        .expect("the report names the first transport failure");
    for c in cause {
        assert!(first.contains(c), "{c:?} not in the report's {first:?}");
        assert!(
            row["transport_error"].contains(c),
            "{c:?} not in steps.csv's {:?}",
            row["transport_error"]
        );
    }
}

/// The fault met by the run's handshake: the run stops (exit 1) naming `cause`, and leaves
/// no step behind.
fn handshake_meets(p: &Played, cause: &[&str]) {
    assert_eq!(p.run.output.status.code(), Some(1), "exit code");
    let stopped = format!("connecting to {}: ", p.front.url());
    assert!(p.stderr.contains(&stopped), "{stopped:?} not in stderr");
    for c in cause {
        assert!(p.stderr.contains(c), "{c:?} not in stderr");
    }
    assert!(!p.out.join("steps.csv").exists(), "a step ran");
}

#[test]
fn a_handshake_that_stalls_on_the_loads_connections_ends_their_requests_as_transport_errors() {
    // Calls of 400 ms keep three requests waiting behind the handshake's connection (it
    // serves one at a time as it frees), so each connect that fails at its timeout fails
    // one of them: with quick calls that connection served them all and a failing connect
    // found none waiting.
    let p = play(
        "stall-load",
        Fault::Stall,
        Faulted::Load,
        &[
            "--connect-timeout",
            "1s",
            "--timeout",
            "5s",
            "--tool",
            "sleep",
            "--args",
            r#"{"ms":400}"#,
        ],
    );
    let row = load_meets(&p, "transport_errors");
    let at = format!("connecting to 127.0.0.1:{}", p.front.port);
    names_the_cause(
        &p,
        &row,
        &[&at, "took over 1s", "the TLS handshake did not finish"],
    );
    let settings = &summary(&p.out)["settings"]["load"];
    assert_eq!(settings["connect_timeout_s"], 1.0);
    assert_eq!(settings["timeout_s"], 5.0);
}

#[test]
fn a_request_timeout_before_the_connect_timeout_ends_a_stalled_connect_as_timeouts() {
    // The request's timeout counts from its send, its connect included: whichever of the two
    // runs out first ends it (docs/metrics.md). The handshake's connection serves the
    // requests waiting one by one as it frees (issue #24: a request waits for the first
    // connection free, not for a dial of its own), so its calls take 900 ms: the requests
    // behind it wait past their timeout while their connections are still being opened.
    let p = play(
        "stall-timeout-first",
        Fault::Stall,
        Faulted::Load,
        &[
            "--connect-timeout",
            "5s",
            "--timeout",
            "1s",
            "--tool",
            "sleep",
            "--args",
            r#"{"ms":900}"#,
        ],
    );
    load_meets(&p, "timeouts");
}

#[test]
fn an_untrusted_certificate_on_the_loads_connections_ends_their_requests_as_transport_errors() {
    let p = play(
        "untrusted-load",
        Fault::Untrusted,
        Faulted::Load,
        &["--timeout", "5s"],
    );
    let row = load_meets(&p, "transport_errors");
    names_the_cause(
        &p,
        &row,
        &["TLS", "invalid peer certificate", "UnknownIssuer"],
    );
}

#[test]
fn a_certificate_for_another_name_on_the_loads_connections_ends_their_requests_as_transport_errors()
{
    let p = play(
        "other-name-load",
        Fault::OtherName,
        Faulted::Load,
        &["--timeout", "5s"],
    );
    let row = load_meets(&p, "transport_errors");
    names_the_cause(&p, &row, &["TLS", "not valid for name \"127.0.0.1\""]);
}

#[test]
fn a_handshake_that_stalls_from_the_first_connection_stops_the_run_naming_it() {
    let p = play(
        "stall-all",
        Fault::Stall,
        Faulted::All,
        &["--connect-timeout", "1s"],
    );
    handshake_meets(&p, &["took over 1s", "the TLS handshake did not finish"]);
}

#[test]
fn a_certificate_for_another_name_stops_the_run_naming_it() {
    let p = play("other-name-all", Fault::OtherName, Faulted::All, &[]);
    handshake_meets(
        &p,
        &[
            "TLS",
            "invalid peer certificate",
            "not valid for name \"127.0.0.1\"",
        ],
    );
}

#[test]
fn a_connect_timeout_of_zero_is_refused_naming_the_flag() {
    let out = mcpload(&["run", "--builtin", "--connect-timeout", "0s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--connect-timeout") && err.contains("more than 0s"),
        "{err}"
    );
}
