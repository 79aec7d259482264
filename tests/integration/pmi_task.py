"""A PMI-1 task for the PMI tests, speaking the wire protocol by hand on $PMI_FD:
python3 pmi_task.py MODE.  It prints what it saw, one line per check."""

import os
import socket
import sys
import time

mode = sys.argv[1]
rank = int(os.environ["PMI_RANK"])
s = socket.socket(fileno=int(os.environ["PMI_FD"]))
buf = b""


def line():
    global buf
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise EOFError("PMI socket closed")
        buf += d
    out, buf = buf.split(b"\n", 1)
    return out.decode()


def cmd(text):
    s.sendall((text + "\n").encode())
    return line()


cmd("cmd=init pmi_version=1 pmi_subversion=1")
kvs = cmd("cmd=get_my_kvsname").split("kvsname=")[1]

if mode == "bounds":
    print("reserved", cmd(f"cmd=put kvsname={kvs} key=PMI_process_mapping value=(x)"))
    value = "v" * 1000
    failed_at = None
    for i in range(1200):
        r = cmd(f"cmd=put kvsname={kvs} key=r{rank}k{i} value={value}")
        if "rc=0" not in r:
            failed_at = i
            print("limit", i, r)
            break
    print("again", cmd(f"cmd=put kvsname={kvs} key=r{rank}k0 value=short"))
    print("barrier", cmd("cmd=barrier_in"))
    print("mapping", cmd(f"cmd=get kvsname={kvs} key=PMI_process_mapping"))
    print("finalize", cmd("cmd=finalize"))
elif mode == "leave":
    # rank 1 leaves (closes PMI, then exits 0) before the barrier; the others enter it
    if rank == 1:
        s.close()
        sys.exit(0)
    t = time.monotonic()
    try:
        r = cmd("cmd=barrier_in")
    except EOFError as exc:
        r = f"EOF {exc}"
    print(f"barrier {r} after {time.monotonic() - t:.1f}s", flush=True)
    sys.exit(0 if "rc=0" in r else 1)
