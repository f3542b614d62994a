# syntax=docker/dockerfile:1
# The mcpload image: a glibc build (x86_64-unknown-linux-gnu, or the builder's own gnu target)
# on Debian trixie slim, run as an unprivileged user. docs/distributed.md builds and runs it:
#
#   docker build -t mcpload:0.1.0 .
#   docker run --rm --user "$(id -u):$(id -g)" -v "$PWD/results:/results" mcpload:0.1.0 \
#       run --builtin --concurrency 1,8,32 --duration 2s
#
# Why a glibc base and not `+crt-static` on an empty one: a statically linked glibc still
# loads its NSS modules at run time to resolve host names, and an empty base has none, so a
# target named by a cluster DNS name (http://mcp.default.svc:8080) would not resolve. The
# slim base also has the CA certificates the TLS verifier reads, a shell for the merge Job's
# `segment-*` glob, and tar for `kubectl cp`. Builder and base are the same Debian release,
# so the binary never asks for a newer glibc than the base has.

# --- build ---------------------------------------------------------------------------------
FROM rust:1.95-trixie AS build
WORKDIR /src

# Dependencies first, in a layer of their own: it is rebuilt only when Cargo.toml or
# Cargo.lock change, not on every edit of src/. The stand-in sources satisfy the manifest
# (its lib, bin and the two [[bench]] targets) and are replaced below.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && echo 'fn main() {}' > benches/correlator.rs \
    && echo 'fn main() {}' > benches/codec.rs \
    && cargo build --release --locked --bin mcpload \
    && rm -rf src

# The real sources; touched so that cargo rebuilds the crate over the stand-ins it just built
# (COPY keeps the files' own times, which may be older than that build).
COPY src ./src
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin mcpload \
    && install -D -m 0755 target/release/mcpload /out/mcpload

# --- run -----------------------------------------------------------------------------------
FROM debian:trixie-slim

# ca-certificates: the roots rustls-platform-verifier checks https targets against. Debian
# versions are not pinned: a pin names one point release and breaks the build at the next.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 mcpload \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin mcpload \
    && mkdir /results \
    && chown 10001:10001 /results

COPY --from=build /out/mcpload /usr/local/bin/mcpload

# Run folders: `--out /results/...`, or the default results/<UTC timestamp>-<name>, which
# from WORKDIR / is /results too.
VOLUME /results
WORKDIR /
USER 10001:10001
ENTRYPOINT ["mcpload"]
CMD ["--help"]
