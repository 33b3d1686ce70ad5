#!/usr/bin/env python3
"""Memory an open TCP connection costs the server: starts BINARY on the benchmark zone, opens
COUNT connections that each ask one query and stay open, and reports the growth of the server's
resident set per connection.

usage: benches/tcp-memory.py BINARY [COUNT=1000] [PORT=5320]
needs: the benchmark zone (benches/kit/genzone.py, which compare-knot.sh runs), in $BENCH_DIR
(default /tmp/clusterset-bench); an open-file limit above COUNT
"""
import os
import socket
import struct
import subprocess
import sys
import time

binary = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
port = int(sys.argv[3]) if len(sys.argv) > 3 else 5320
objects = os.path.join(os.environ.get("BENCH_DIR", "/tmp/clusterset-bench"), "objects.yaml")
if not os.path.exists(objects):
    sys.exit(f"{objects} missing: run benches/kit/genzone.py first")
server = subprocess.Popen([binary, "--file", objects, "--admin-listen", "127.0.0.1:0",
                           "--log-level", "warn", "--listen", f"127.0.0.1:{port}",
                           "--tcp-idle-timeout", "120s", "--tcp-max-connections", str(count + 10)])


def rss_kib():
    with open(f"/proc/{server.pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


name = b"".join(bytes([len(label)]) + label.encode() for label in "svc1.ns1.svc.clusterset.local".split("."))
query = bytes.fromhex("abcd01000001000000000000") + name + b"\x00\x00\x01\x00\x01"
try:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            time.sleep(0.1)
    time.sleep(2)
    before = rss_kib()
    conns = []
    for _ in range(count):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(struct.pack(">H", len(query)) + query)
        conns.append(c)
    for c in conns:
        n = struct.unpack(">H", c.recv(2))[0]
        c.recv(n)
    time.sleep(1)
    after = rss_kib()
    print(f"{os.path.basename(binary)}: RSS {before / 1024:.1f} MiB idle, {after / 1024:.1f} MiB with "
          f"{count} open connections: {(after - before) / count:.1f} KiB each")
finally:
    server.kill()
    server.wait()
