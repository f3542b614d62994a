//! deploy/kubernetes/ run by hand: the segments Job's container arguments and the merge Job's
//! shell command, read from the manifests and expanded as Kubernetes expands them (`$(VAR)`
//! from the container's environment), run as four real processes against one `mcpload serve`
//! and then merged. What the schema validator (deploy/check.sh) cannot tell: that mcpload
//! takes these arguments and that the folders they write are the merge's inputs.

use crate::support::machine;
use crate::support::run::{num, steps, summary};
use crate::support::scratch::scratch;
use crate::support::servers::{serve, target_stats};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The items of the first `key:` list of the manifest at `path` (`- item` lines, quotes
/// removed): enough YAML for the two Jobs' `args` and `command`.
fn list(path: &str, key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap();
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("{key}:"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let head = lines.next().unwrap_or_else(|| panic!("{path}: no {key}:"));
    lines
        .take_while(|l| indent(l) > indent(head) && l.trim_start().starts_with("- "))
        .map(|l| l.trim_start()[2..].trim().trim_matches('"').to_owned())
        .collect()
}

/// `$(NAME)` replaced by `vars`' value, as Kubernetes expands a container's arguments.
fn expand(arg: &str, vars: &[(&str, String)]) -> String {
    vars.iter()
        .fold(arg.to_owned(), |a, (k, v)| a.replace(&format!("$({k})"), v))
}

#[test]
fn the_segments_job_and_the_merge_job_run_as_written() {
    let _share = machine::loading();
    let dir = scratch("deploy-kubernetes");
    let server = serve(&[]);
    // The ConfigMap's profile, mounted at /profile; the volume, mounted at /results.
    let profile = dir.join("profile.toml");
    std::fs::write(
        &profile,
        format!(
            "[target]\nurl = \"{}\"\n\n[load]\nconcurrency = \"2,4\"\nduration = \"1s\"\n\
             warmup = \"0s\"\ntimeout = \"1s\"\n\n[[mix]]\nmethod = \"tools/call\"\n\
             tool = \"echo\"\nargs = {{ message = \"hi {{{{seq}}}}\" }}\n",
            server.url
        ),
    )
    .unwrap();
    let results = dir.join("results");
    let place = |a: String| {
        a.replace("/profile/profile.toml", profile.to_str().unwrap())
            .replace("/results", results.to_str().unwrap())
    };
    let args = list("deploy/kubernetes/segments-job.yaml", "args");
    let segments: usize = args[args.iter().position(|a| a == "--segments").unwrap() + 1]
        .parse()
        .unwrap();
    // The launcher's START_AT (a whole second a few seconds ahead) and RUN.
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 4;
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let start = humantime::format_rfc3339_seconds(start).to_string();
    let run = "run-1".to_owned();
    let pods: Vec<_> = (0..segments)
        .map(|index| {
            let vars = [
                ("START_AT", start.clone()),
                ("RUN", run.clone()),
                ("JOB_COMPLETION_INDEX", index.to_string()),
            ];
            Command::new(env!("CARGO_BIN_EXE_mcpload"))
                .args(args.iter().map(|a| place(expand(a, &vars))))
                .env("JOB_COMPLETION_INDEX", index.to_string())
                .env("NO_COLOR", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for pod in pods {
        let o = pod.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    for index in 0..segments {
        let s = summary(&results.join(&run).join(format!("segment-{index}")));
        assert_eq!(s["segment"]["index"], index + 1);
        assert_eq!(s["segment"]["count"], segments);
    }
    // The merge Job: its shell command, with mcpload on the PATH as in the image.
    let command = list("deploy/kubernetes/merge-job.yaml", "command");
    let script = place(list("deploy/kubernetes/merge-job.yaml", "args").remove(0));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mcpload")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(&command[0])
        .args(&command[1..])
        .arg(&script)
        .env("RUN", &run)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged = results.join(&run).join("merged");
    let rows = steps(&merged);
    let levels: Vec<f64> = rows.iter().map(|r| num(r, "concurrency")).collect();
    assert_eq!(levels, [2.0, 4.0]);
    let requests: f64 = rows.iter().map(|r| num(r, "requests")).sum();
    let echo = target_stats(&server.url)["operations"]["echo"]["requests"]
        .as_f64()
        .unwrap();
    assert_eq!(requests, echo);
    assert_eq!(
        summary(&merged)["merged_from"].as_array().unwrap().len(),
        segments
    );
}
