#!/usr/bin/env python3
"""Writes the seed corpus of the `query` fuzz target into corpus/query: queries for every name
form of the example cluster set and every common type, with and without EDNS, plus the
malformed shapes of tests/integration/protocol.rs. The `objects` seeds are the repository's YAML files."""
import os, shutil, struct

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus", "query")
os.makedirs(out, exist_ok=True)

def name(n):
    b = b""
    for label in n.strip(".").split("."):
        if label:
            b += bytes([len(label)]) + label.encode()
    return b + b"\0"

def query(n, qtype, edns=None, flags=0x0100, qd=1, an=0, ns=0, ar=None, qclass=1, do=False):
    ar = (1 if edns else 0) if ar is None else ar
    m = struct.pack(">HHHHHH", 0x1234, flags, qd, an, ns, ar) + name(n) + struct.pack(">HH", qtype, qclass)
    if edns:
        m += b"\0" + struct.pack(">HHBBHH", 41, edns, 0, 0, 0x8000 if do else 0, 0)
    return m

names = ["clusterset.local", "svc.clusterset.local", "dns-version.clusterset.local",
         "shop.svc.clusterset.local", "checkout.shop.svc.clusterset.local",
         "_http._tcp.checkout.shop.svc.clusterset.local", "db.data.svc.clusterset.local",
         "_postgres._tcp.db.data.svc.clusterset.local", "db-0.east.db.data.svc.clusterset.local",
         "db-0.central.eu.db.data.svc.clusterset.local", "workers.batch.svc.clusterset.local",
         "nope.shop.svc.clusterset.local", "example.com", "ns.dns.clusterset.local"]
types = [1, 28, 33, 16, 2, 6, 5, 12, 255, 15, 252, 251, 99]
seeds = {}
for i, n in enumerate(names):
    for t in types:
        seeds[f"{i:02}-{t}"] = query(n, t)
        seeds[f"{i:02}-{t}-edns"] = query(n, t, edns=1232, do=(t == 1))
base = query("checkout.shop.svc.clusterset.local", 1, edns=1232)
seeds["badvers"] = base[:-7] + b"\1" + base[-6:]
seeds["notify"] = base[:2] + bytes([4 << 3]) + base[3:]
seeds["chaos"] = query("version.bind", 16, qclass=3)
seeds["class-any"] = query("checkout.shop.svc.clusterset.local", 1, qclass=255)
seeds["qd0"] = query("clusterset.local", 1, qd=0)
seeds["qd2"] = query("clusterset.local", 1, qd=2)
seeds["ar-lies"] = base[:11] + b"\3" + base[12:]
seeds["opt-in-answer"] = base[:7] + b"\1" + base[8:11] + b"\0" + base[12:]
seeds["two-opts"] = base[:11] + b"\2" + base[12:] + base[-11:]
seeds["pointer-loop"] = base[:12] + b"\xc0\x0c\0\1\0\1"
seeds["forward-pointer"] = base[:12] + b"\xc0\xff\0\1\0\1"
seeds["label-64"] = base[:12] + b"\x40" + b"a" * 64 + b"\0\0\1\0\1"
seeds["name-300"] = base[:12] + (b"\x3f" + b"a" * 63) * 5 + b"\0\0\1\0\1"
seeds["response"] = base[:2] + bytes([base[2] | 0x80]) + base[3:]
seeds["runt"] = base[:11]
for k, v in seeds.items():
    open(os.path.join(out, k), "wb").write(v)

objs = os.path.join(here, "corpus", "objects")
os.makedirs(objs, exist_ok=True)
root = os.path.dirname(here)
for src in ["examples/clusterset.yaml", "tests/fixtures/behaviour.yaml"]:
    shutil.copy(os.path.join(root, src), os.path.join(objs, os.path.basename(src)))
open(os.path.join(objs, "list.json"), "w").write(
    '{"kind":"List","items":[{"apiVersion":"multicluster.x-k8s.io/v1alpha1","kind":"ServiceImport",'
    '"metadata":{"name":"a","namespace":"b"},"spec":{"type":"ClusterSetIP","ips":["10.0.0.1"],'
    '"ports":[{"name":"http","protocol":"TCP","port":80}]}}]}')
print(len(seeds), "query seeds")

# Frames for the `frame` target: the first query inside Ethernet + IPv4/IPv6 + UDP, as the XDP
# path receives it, and the shapes it must drop.
def csum(b, start=0):
    if len(b) % 2:
        b += b"\0"
    s = start + sum(int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return s

def frame(msg, v6=False, sport=40000, dport=53, check=None):
    udp = sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + (8 + len(msg)).to_bytes(2, "big") + b"\0\0" + msg
    if v6:
        addrs = bytes(15) + b"\1" + bytes(15) + b"\1"
    else:
        addrs = bytes([127, 0, 0, 1, 127, 0, 0, 1])
    c = (0xffff - csum(addrs + b"\0\x11" + len(udp).to_bytes(2, "big") + udp)) or 0xffff
    udp = udp[:6] + (c if check is None else check).to_bytes(2, "big") + udp[8:]
    eth = bytes(12) + (b"\x86\xdd" if v6 else b"\x08\0")
    if v6:
        return eth + b"\x60\0\0\0" + len(udp).to_bytes(2, "big") + b"\x11\x40" + addrs + udp
    ip = b"\x45\0" + (20 + len(udp)).to_bytes(2, "big") + b"\0\0\x40\0\x40\x11\0\0" + addrs
    ip = ip[:10] + (0xffff - csum(ip)).to_bytes(2, "big") + ip[12:]
    return eth + ip + udp

frames = os.path.join(here, "corpus", "frame")
os.makedirs(frames, exist_ok=True)
fs = {
    "v4": frame(base),
    "v6": frame(base, v6=True),
    "v4-no-checksum": frame(base, check=0),
    "v4-bad-checksum": frame(base, check=0x1234),
    "v4-source-port-0": frame(base, sport=0),
    "v4-other-port": frame(base, dport=5353),
    "v4-runt": frame(base)[:40],
    "v4-padded": frame(base) + bytes(20),
}
v4 = fs["v4"]
fs["v4-options"] = v4[:14] + b"\x46" + v4[15:]
fs["v4-fragment"] = v4[:20] + b"\x20\0" + v4[22:]
fs["v6-extension"] = fs["v6"][:20] + b"\0" + fs["v6"][21:]
for k, v in fs.items():
    open(os.path.join(frames, k), "wb").write(v)
print(len(fs), "frame seeds")
