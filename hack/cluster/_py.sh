# Sourced by up.sh/down.sh/status.sh: runs `python -m tests.cluster ACTION ...` without putting
# the repository root first on sys.path (its operator/ folder would shadow the stdlib module).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"; [[ -x "$py" ]] || py=python3
cluster_cli() {
  PYTHONSAFEPATH=1 "$py" -c 'import sys; sys.path.append(sys.argv.pop(1)); from tests.cluster.__main__ import main; sys.exit(main())' "$root" "$@"
}
