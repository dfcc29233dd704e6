#!/bin/sh
# Builds llmbench's wheel from the source tree in the current directory and installs it, with
# the locked runtime dependencies, into a fresh virtual environment at PREFIX.
#
#   sh hack/image/install.sh PREFIX        (PYTHON=interpreter, default python3)
#
# The image's builder stage runs exactly this (Dockerfile) and so does
# tests/image/test_image.py, so what the image installs is what the test checks.
#  - The build backend comes from hack/image/build.lock and the runtime dependencies
#    (pyproject's dependencies plus the `operator` extra) from requirements.lock; both pin every
#    package with its hashes (--require-hashes), so nothing unpinned or altered is installed,
#    and only wheels are accepted (--only-binary): no compiler is needed or present.
#  - The wheel is installed with --no-deps after the lock, then `pip check` proves the lock
#    satisfies every requirement of what was installed.
#  - PREFIX has no pip of its own (--without-pip): the interpreter's pip installs into it.
# Regenerate the locks with `sh hack/image/lock.sh`.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: sh hack/image/install.sh PREFIX" >&2
    exit 2
fi
prefix=$1
python=${PYTHON:-python3}
here=$(dirname "$0")
if [ -e "$prefix" ]; then
    echo "install.sh: $prefix exists; the environment must be fresh" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

pip_in() {  # pip_in VENV ARGS...: the interpreter's pip, installing into VENV
    venv=$1
    shift
    "$python" -m pip --disable-pip-version-check --python "$venv/bin/python" "$@"
}

echo "== install.sh: build the wheel with the locked build backend"
"$python" -m venv --without-pip "$work/build-env"
pip_in "$work/build-env" install --no-deps --require-hashes --only-binary=:all: \
    -r "$here/build.lock"
pip_in "$work/build-env" wheel --no-deps --no-build-isolation --wheel-dir "$work/dist" .

echo "== install.sh: install the locked dependencies and the wheel into $prefix"
"$python" -m venv --without-pip "$prefix"
pip_in "$prefix" install --no-deps --require-hashes --only-binary=:all: -r requirements.lock
pip_in "$prefix" install --no-deps --no-index "$work"/dist/llmbench-*.whl
pip_in "$prefix" check
