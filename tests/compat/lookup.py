# Test infrastructure for tests/integration/compat.rs: Python's socket.getaddrinfo. For each case `host:NAME`
# one line: the milliseconds it took, a tab, the addresses space-separated, or `error` and the
# message.
import socket
import sys
import time

for case in sys.argv[1:]:
    kind, _, name = case.partition(":")
    start = time.monotonic()
    try:
        if kind != "host":
            raise ValueError(f"unsupported case {case}")
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        out = " ".join(dict.fromkeys(i[4][0] for i in infos))
        print(f"{(time.monotonic() - start) * 1e3:.3f}\t{out}", flush=True)
    except Exception as e:  # every failure is a result to report
        print(f"{(time.monotonic() - start) * 1e3:.3f}\terror\t{e}", flush=True)
