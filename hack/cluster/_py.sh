# Sourced by up.sh/down.sh/status.sh: runs `python -m tests.cluster ACTION ...` from the
# repository root, wherever the caller's working directory is.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"; [[ -x "$py" ]] || py=python3
cluster_cli() {
  (cd "$root" && PYTHONSAFEPATH= "$py" -m tests.cluster "$@")
}
