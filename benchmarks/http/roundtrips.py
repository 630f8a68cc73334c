#!/usr/bin/env python3
"""Counts the Redis commands and bytes per guarded request: INFO commandstats and INFO stats
(total_net_input_bytes, total_net_output_bytes) deltas (CONFIG RESETSTAT before) over N first
sends (new keys) and then N replays (the same keys), for one running application. The bytes
include redis-cli's own CONFIG RESETSTAT and INFO (a few hundred bytes per pass, not per request)."""
import http.client, subprocess, sys, uuid
port, redis_port, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def cli(*args):
    return subprocess.run(["redis-cli", "-p", redis_port, *args], check=True, capture_output=True, text=True).stdout
def net():
    out = {}
    for line in cli("INFO", "stats").splitlines():
        if line.startswith("total_net_input_bytes:") or line.startswith("total_net_output_bytes:"):
            name, value = line.strip().split(":")
            out[name] = int(value)
    return out
def stats():
    out = {}
    for line in cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            out[name] = int(dict(kv.split("=") for kv in rest.split(","))["calls"])
    return out
body = '{"to":"+15550100","template":"otp","code":"123456"}'
keys = [f"rt-{uuid.uuid4()}" for _ in range(n)]
conn = http.client.HTTPConnection("127.0.0.1", port)
def post(key):
    conn.request("POST", "/guarded", body, {"Content-Type": "application/json", "Idempotency-Key": key})
    r = conn.getresponse(); r.read()
    return r.status, r.getheader("Idempotent-Replayed")
post("warm-" + str(uuid.uuid4()))
for mode in ("first-send", "replay"):
    cli("CONFIG", "RESETSTAT")
    replayed = 0
    for k in keys:
        status, rep = post(k)
        assert status == 200, status
        replayed += rep == "true"
    bytes_ = net()
    s = stats()
    s.pop("config|resetstat", None); s.pop("config", None); s.pop("info", None)
    total = sum(s.values())
    print(f"{mode}: {n} requests, {replayed} replayed; commands {dict(sorted(s.items()))}; {total / n:.3f} per request; bytes to Redis {bytes_['total_net_input_bytes'] / n:.1f}, from Redis {bytes_['total_net_output_bytes'] / n:.1f} per request")
