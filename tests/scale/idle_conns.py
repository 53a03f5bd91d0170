#!/usr/bin/env python3
# idle_conns.py - N connections between two processes, each carrying one
# exchange, then held idle; prints setup time, memory of both processes and
# how many connections the switch carried (run both under the preload).
#   idle_conns.py N PORT
import os, socket, sys, time

n, port = int(sys.argv[1]), int(sys.argv[2])
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(4096)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    conns = []
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", port))
        c.sendall(i.to_bytes(4, "little"))
        assert c.recv(4) == (i ^ 0x5a5a5a5a).to_bytes(4, "little")
        conns.append(c)
    os.write(w, b"k")
    time.sleep(3600)
    sys.exit(0)
os.close(w)
t0 = time.time()
acc = []
for i in range(n):
    s, _ = ls.accept()
    v = int.from_bytes(s.recv(4), "little")
    s.sendall((v ^ 0x5a5a5a5a).to_bytes(4, "little"))
    acc.append(s)
assert os.read(r, 1) == b"k"
dt = time.time() - t0

def rss(p):
    with open("/proc/%d/status" % p) as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0

# every connection still answers after the idle period
time.sleep(1)
print("connections=%d setup_s=%.2f rate=%.0f/s server_rss_kib=%d client_rss_kib=%d"
      % (n, dt, n / dt, rss(os.getpid()), rss(pid)))
os.kill(pid, 9)
os.waitpid(pid, 0)
