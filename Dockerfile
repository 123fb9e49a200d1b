# syntax=docker/dockerfile:1
# The kennel service in a container: a build stage with the Rust toolchain,
# then a small Debian stage with the binary alone, run as a user of its own.
#
#   docker build -t kennel --build-arg KENNEL_GIT_REV=$(git rev-parse --short HEAD) .
#   docker run --rm -p 7878:7878 kennel                      # the demo pool
#   docker run --rm -p 7878:7878 -v $PWD/kennel.toml:/etc/kennel/kennel.toml:ro \
#       kennel serve --config /etc/kennel/kennel.toml --listen 0.0.0.0:7878
#
# Workers written in Python, Node, … need their runtime: build FROM this
# image and install it (see docs/SERVICE.md, "Packaging").

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# `kennel --version` names this revision (the build has no .git).
ARG KENNEL_GIT_REV=""
ENV KENNEL_GIT_REV=${KENNEL_GIT_REV}
RUN cargo build --release --locked -p kennel-server \
 && install -m 0755 target/release/kennel /usr/local/bin/kennel

FROM debian:bookworm-slim AS run
# tini as PID 1: it reaps what a worker's children leave and hands the
# signals on to kennel, which closes its pools.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/kennel \
        --create-home --shell /usr/sbin/nologin kennel \
 && mkdir -p /etc/kennel
COPY --from=build /usr/local/bin/kennel /usr/local/bin/kennel
USER 10001:10001
WORKDIR /var/lib/kennel
EXPOSE 7878
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/kennel"]
CMD ["serve", "--listen", "0.0.0.0:7878"]
