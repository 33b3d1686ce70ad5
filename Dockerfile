# Two stages: build the release binary, then ship it alone on a distroless, non-root base.
FROM rust:1-bookworm AS build
WORKDIR /src
# The git revision for coredns_build_info: docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD)
ARG REVISION=unknown
ENV CLUSTERSET_DNS_REVISION=$REVISION
COPY Cargo.toml Cargo.lock build.rs ./
COPY src src
COPY benches benches
# src/fuzzing.rs seeds its corpus from the example (include_str!), so the library reads it.
COPY examples examples
RUN cargo build --release --locked --bin clusterset-dns

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/clusterset-dns /usr/local/bin/clusterset-dns
USER 65532:65532
EXPOSE 1053/udp 1053/tcp 9153/tcp
ENTRYPOINT ["/usr/local/bin/clusterset-dns"]
