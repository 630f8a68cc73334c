#!/usr/bin/env python3
"""The Redis server's CPU per key of a batch claim, against the campaign floor (Python 3 stdlib only).

    python3 benchmarks/scale/redis-script-cost.py PORT [CALLS]

Against a running redis-server 7 on 127.0.0.1:PORT (it is FLUSHALLed), claims CALLS x 1,000 new
keys four ways and prints the server's CPU per key (INFO cpu, user + sys, before and after, so the
parsing of commands and the writing of replies count too):

  claim-batch, SET NX GET   the store's claim-batch.lua as Redis 7 runs it (first argument '1')
  claim-batch, GET + SET    the same script on the path Redis before 7.0 takes ('0'): claim()'s
                            GET, then SET, per key (what every server ran before run 14)
  pipelined SET NX PX       the campaign floor (ScaleBench campaign mode=floor)
  pipelined SET NX GET PX   the single-key claim, pipelined

The records are in-progress records of the store's size (91 bytes). Nothing here is the store's
client: read it for the server's side of the cost only.
"""
import re
import socket
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "idempotency-redis/src/main/resources/dev/idempotency/redis"
BATCH = 1000
WINDOW = "86400000"


class Redis:
    def __init__(self, port):
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.replies = self.socket.makefile("rb")

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else arg
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        return b"".join(out)

    def read(self):
        line = self.replies.readline()
        kind = line[:1]
        if kind in (b"+", b":"):
            return line[1:].strip()
        if kind == b"-":
            raise RuntimeError(line.decode().strip())
        if kind == b"$":
            n = int(line[1:])
            return None if n < 0 else self.replies.read(n + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(max(int(line[1:]), 0))]
        raise RuntimeError(f"unexpected reply {line!r}")

    def call(self, *args):
        self.socket.sendall(self.encode(*args))
        return self.read()

    def pipeline(self, commands):
        self.socket.sendall(b"".join(self.encode(*c) for c in commands))
        return [self.read() for _ in commands]

    def cpu_seconds(self):
        info = self.call("INFO", "cpu").decode()
        return sum(float(re.search(rf"{k}:([0-9.]+)", info).group(1)) for k in ("used_cpu_user", "used_cpu_sys"))


def record():
    field = lambda s: f"{len(s)}:{s}"
    return "I" + field("o" * 22) + field("1") + field("f" * 43) + field("") + field("800") + field(WINDOW) + "0:0:0:"


def main():
    port = int(sys.argv[1])
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    redis = Redis(port)
    redis.call("FLUSHALL")
    source = (SCRIPTS / "record-functions.lua").read_text() + "\n" + (SCRIPTS / "claim-batch.lua").read_text()
    sha = redis.call("SCRIPT", "LOAD", source).decode()
    value = record()

    def batch_script(flag, name):
        for c in range(calls):
            keys = [f"{name}:{c}:{i}" for i in range(BATCH)]
            args = [flag]
            for _ in range(BATCH):
                args += [value, WINDOW, "800", "1", "o" * 22, "f" * 43]
            replies = redis.call("EVALSHA", sha, str(BATCH), *keys, *args)
            assert all(r == b"1" or (isinstance(r, list) and r[0] == b"1") for r in replies), replies[:3]

    def pipelined(extra, name):
        for c in range(calls):
            redis.pipeline([("SET", f"{name}:{c}:{i}", value, "NX", *extra, "PX", WINDOW) for i in range(BATCH)])

    ways = [
        ("claim-batch, SET NX GET", lambda: batch_script("1", "script-setget")),
        ("claim-batch, GET + SET", lambda: batch_script("0", "script-getset")),
        ("pipelined SET NX PX", lambda: pipelined((), "floor")),
        ("pipelined SET NX GET PX", lambda: pipelined(("GET",), "setget")),
    ]
    for name, run in ways:
        before, started = redis.cpu_seconds(), time.time()
        run()
        micros = (redis.cpu_seconds() - before) / (calls * BATCH) * 1e6
        print(f"{name:26} server CPU {micros:6.2f} us per key   (wall {time.time() - started:5.2f} s)")


if __name__ == "__main__":
    main()
