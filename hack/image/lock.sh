#!/bin/sh
# Regenerates the image's lock files from pyproject.toml, with uv (`pip install uv`):
#
#   sh hack/image/lock.sh              keep the current pins where they still fit
#   sh hack/image/lock.sh --upgrade    newest versions of everything
#
# requirements.lock: [project] dependencies plus the `operator` extra, for the image's Python
# (PYTHON_VERSION in the Dockerfile) on Linux, every pin with the hashes of all its files.
# hack/image/build.lock: pyproject's [build-system] requires (the wheel's build backend).
# tests/image/test_image.py fails when pyproject.toml and the locks disagree.
set -eu
cd "$(dirname "$0")/../.."
python_version=$(sed -n 's/^ARG PYTHON_VERSION=//p' Dockerfile)
set -- --generate-hashes --python-version "$python_version" --python-platform linux \
    --custom-compile-command "sh hack/image/lock.sh" "$@"
uv pip compile pyproject.toml --extra operator -o requirements.lock "$@"
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' \
    | uv pip compile - -o hack/image/build.lock "$@"
