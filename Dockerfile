# syntax=docker/dockerfile:1
# llmbench in one image, both entrypoints: the operator Deployment runs `llmbench operator ...`,
# the runner Job runs `llmbench job ...` (and `docker run IMAGE profile --url ...` works alone).
#
#   docker build -t llmbench:0.1.0 .        (or podman build; BuildKit for the cache mount)
#
# The builder stage builds the wheel and installs it with the locked dependencies into the
# virtual environment /opt/llmbench (hack/image/install.sh; tests/image/test_image.py runs the
# same script and the installed commands); the final stage is the slim base plus that
# environment: no compiler, no pip cache, no source tree, no tests.

ARG PYTHON_VERSION=3.11
ARG BASE_IMAGE=python:${PYTHON_VERSION}-slim-trixie

FROM ${BASE_IMAGE} AS builder
WORKDIR /src
COPY hack/image/ hack/image/
COPY pyproject.toml README.md requirements.lock ./
COPY llmbench/ llmbench/
RUN --mount=type=cache,target=/root/.cache/pip sh hack/image/install.sh /opt/llmbench

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="llmbench" \
      org.opencontainers.image.description="Kubernetes-native LLM inference benchmarking with GenAI-Perf metric semantics: the operator and the runner" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
# The runner Job runs as 65532 with a read-only root filesystem and emptyDirs at /results and
# /tmp; a passwd entry (home /tmp) for tools that look the user up. The base image's own pip and
# setuptools are removed: nothing is installed at run time, and /opt/llmbench has its own
# packages.
RUN groupadd --system --gid 65532 llmbench \
 && useradd --system --no-log-init --uid 65532 --gid 65532 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin llmbench \
 && install -d -o 65532 -g 65532 -m 0755 /results \
 && python -m pip uninstall --no-cache-dir --yes pip setuptools wheel
COPY --from=builder /opt/llmbench /opt/llmbench
ENV PATH=/opt/llmbench/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
USER 65532:65532
WORKDIR /results
ENTRYPOINT ["llmbench"]
CMD ["--help"]
