#!/usr/bin/env bash
# Makes the container engine and the two base images the repository's Dockerfile builds FROM,
# since no registry can be reached: a Docker engine of the tests' own (Debian's docker.io, its
# own data root and socket, no bridge, so it touches no address range), and, built from Debian
# packages with debootstrap:
#   rust:1-bookworm                        Debian 12 with gcc and this machine's Rust toolchain
#   gcr.io/distroless/cc-debian12:nonroot  what distroless cc holds: glibc, libgcc, CA
#                                          certificates, and the nonroot user 65532
# Prints the engine's socket (for DOCKER_HOST). The root file systems are cached by this
# script's hash and the toolchain's version; the engine is started when it is not running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}
docker=/usr/bin/docker # Debian's client, of the engine's version (not a newer one on PATH)
say() { echo "tests/image/setup.sh: $*" >&2; }

for tool in dockerd containerd runc debootstrap; do
  command -v "$tool" >/dev/null || { say "$tool is needed (apt-get install docker.io debootstrap)"; exit 1; }
done
toolchain=$(rustc --print sysroot)
rust_version=$(rustc --version | awk '{print $2}')
key=$( (cat "$0"; echo "$rust_version") | sha256sum | cut -c1-16)
dir=$cache/image-$key
mkdir -p "$cache"

# The engine: its own data root, socket and pid file under the cache; no bridge and no iptables
# rules, so builds and containers use the host's network only.
sock=$cache/docker.sock
if ! DOCKER_HOST=unix://$sock $docker version >/dev/null 2>&1; then
  say "starting dockerd (data root $cache/docker)"
  mkdir -p "$cache/docker"
  nohup dockerd --data-root "$cache/docker" --exec-root "$cache/docker-exec" \
    --host "unix://$sock" --pidfile "$cache/docker.pid" --bridge=none --iptables=false \
    --ip6tables=false >"$cache/dockerd.log" 2>&1 &
  for _ in $(seq 1 100); do
    DOCKER_HOST=unix://$sock $docker version >/dev/null 2>&1 && break
    sleep 0.2
  done
  DOCKER_HOST=unix://$sock $docker version >/dev/null || { say "dockerd did not start: $(tail -5 "$cache/dockerd.log")"; exit 1; }
fi
export DOCKER_HOST=unix://$sock

if [ ! -f "$dir/done" ]; then
  rm -rf "$dir" && mkdir -p "$dir"
  say "making the base images from Debian 12 packages into $dir (once; a few minutes)"
  # The build stage: Debian 12 with a C toolchain (the linker rustc calls) and CA certificates
  # (cargo fetches crates over HTTPS), plus this machine's Rust toolchain.
  debootstrap --variant=minbase --include=ca-certificates,gcc,libc6-dev,git bookworm \
    "$dir/build" http://deb.debian.org/debian >"$dir/build.log" 2>&1 ||
    { say "debootstrap failed: $(tail -5 "$dir/build.log")"; exit 1; }
  # This machine's trust store, so that cargo in the build reaches crates.io as the machine
  # does (through whatever TLS proxy the machine trusts).
  cp -L /etc/ssl/certs/ca-certificates.crt "$dir/build/etc/ssl/certs/ca-certificates.crt"
  mkdir -p "$dir/build/usr/local/rust"
  cp -a "$toolchain/." "$dir/build/usr/local/rust/"
  rm -rf "$dir/build/usr/local/rust/share/doc" # 0.8 GB of HTML nobody builds with
  # The runtime stage, as distroless cc-debian12:nonroot holds it: the C library, libgcc, CA
  # certificates, time zones, and the users root and nonroot (65532) with their homes.
  debootstrap --variant=minbase --include=ca-certificates,tzdata bookworm "$dir/full" \
    http://deb.debian.org/debian >"$dir/run.log" 2>&1 ||
    { say "debootstrap failed: $(tail -5 "$dir/run.log")"; exit 1; }
  r=$dir/run
  mkdir -p "$r/etc/ssl/certs" "$r/usr/share" "$r/home/nonroot" "$r/root" "$r/tmp" "$r/lib64" "$r/usr/lib/x86_64-linux-gnu"
  ln -s usr/lib "$r/lib"
  for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1; do
    cp -L "$dir/full/usr/lib/x86_64-linux-gnu/$lib" "$r/usr/lib/x86_64-linux-gnu/"
  done
  ln -s ../usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$r/lib64/ld-linux-x86-64.so.2"
  cp -L "$dir/full/etc/ssl/certs/ca-certificates.crt" "$r/etc/ssl/certs/"
  cp -a "$dir/full/usr/share/zoneinfo" "$r/usr/share/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$r/etc/group"
  chown 65532:65532 "$r/home/nonroot"
  chmod 1777 "$r/tmp"
  rm -rf "$dir/full"
  touch "$dir/done"
fi

# Imported under the names the Dockerfile's FROM lines use (again whenever the engine lost them).
if ! $docker image inspect rust:1-bookworm >/dev/null 2>&1; then
  say "importing rust:1-bookworm"
  tar -C "$dir/build" -c . | $docker import \
    --change 'ENV PATH=/usr/local/rust/bin:/usr/local/cargo/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV CARGO_HOME=/usr/local/cargo' - rust:1-bookworm >/dev/null
fi
if ! $docker image inspect gcr.io/distroless/cc-debian12:nonroot >/dev/null 2>&1; then
  say "importing gcr.io/distroless/cc-debian12:nonroot"
  tar -C "$dir/run" -c . | $docker import --change 'USER 65532:65532' \
    --change 'WORKDIR /home/nonroot' - gcr.io/distroless/cc-debian12:nonroot >/dev/null
fi
echo "unix://$sock"
