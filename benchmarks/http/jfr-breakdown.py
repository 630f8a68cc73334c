#!/usr/bin/env python3
"""CPU samples of a JFR recording (jdk.ExecutionSample) by the parts of @IdempotentEndpoint: the
share of all samples whose stack holds a frame of each part (inclusive; parts nest), the share by
thread pool, and the hottest methods of the SDK's own code (self time).
Usage: jfr-breakdown.py recording.jfr"""
import collections
import json
import re
import subprocess
import sys

PARTS = [
    ("MVC filter (wrappers, finish)", "dev.idempotency.spring.web.IdempotentEndpointFilter.doFilterInternal"),
    ("MVC interceptor preHandle (key, scope, fingerprint, claim)", "dev.idempotency.spring.web.IdempotentEndpointInterceptor.preHandle"),
    ("  request fingerprint (MVC)", "dev.idempotency.spring.web.RequestFingerprint.of"),
    ("  body caching (MVC)", "dev.idempotency.spring.web.BodyCachingRequest."),
    ("  PendingCall.claim (waits for the claim)", "dev.idempotency.spring.PendingCall.claim"),
    ("response capture (MVC)", "dev.idempotency.spring.web.CapturingResponse."),
    ("EndpointCall.finish (store, wait, send on)", "dev.idempotency.spring.web.EndpointCall.finish"),
    ("stored response: capture", "dev.idempotency.spring.web.StoredResponse.capture"),
    ("stored response: encode", "dev.idempotency.spring.web.StoredResponse$1.encode"),
    ("stored response: decode", "dev.idempotency.spring.web.StoredResponse$1.decode"),
    ("stored response: replay (MVC)", "dev.idempotency.spring.web.StoredResponse.replayTo"),
    ("WebFlux filter", "dev.idempotency.spring.web.IdempotentEndpointWebFilter."),
    ("  handler lookup (WebFlux, every request)", "org.springframework.web.reactive.handler.AbstractHandlerMapping.getHandler"),
    ("  request fingerprint (WebFlux)", "dev.idempotency.spring.web.ReactiveRequestFingerprint."),
    ("  body fingerprint (JSON canonical form)", "dev.idempotency.spring.web.BodyFingerprint."),
    ("  replayed exchange (WebFlux)", "dev.idempotency.spring.web.ReplayedExchange."),
    ("  response capture (WebFlux)", "dev.idempotency.spring.web.CapturingServerResponse."),
    ("key checks and scoping", "dev.idempotency.spring.web.EndpointKeys."),
    ("IdempotencyKey.of", "dev.idempotency.IdempotencyKey.of"),
    ("request fingerprint digest", "dev.idempotency.RequestFingerprints."),
    ("guard: async call", "dev.idempotency.AsyncGuardedCall."),
    ("guard: CallSupport", "dev.idempotency.CallSupport."),
    ("guard: key digest", "dev.idempotency.Digests."),
    ("guard: events/observers", "dev.idempotency.CallEvents."),
    ("in-memory store", "dev.idempotency.inmemory."),
    ("Redis store (SDK code)", "dev.idempotency.redis."),
    ("Lettuce", "io.lettuce."),
    ("  Lettuce SharedLock (every command's write)", "io.lettuce.core.protocol.SharedLock."),
    ("benchmark /floor (RedisFloor, no SDK code)", "dev.idempotency.benchmarks.http.RedisFloor"),
    ("Jackson", "tools.jackson."),
    ("Jackson 2", "com.fasterxml.jackson."),
    ("MDC", "org.slf4j.MDC."),
    ("JFR itself", "jdk.jfr."),
]


def frames(event):
    stack = event["values"].get("stackTrace") or {}
    for frame in stack.get("frames", []):
        method = frame["method"]
        yield method["type"]["name"].replace("/", ".") + "." + method["name"]


def main(path):
    raw = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "300", "--events", "jdk.ExecutionSample", path],
        check=True, capture_output=True, text=True).stdout
    events = json.loads(raw)["recording"]["events"]
    total = len(events)
    inclusive = collections.Counter()
    threads = collections.Counter()
    self_sdk = collections.Counter()
    for event in events:
        names = list(frames(event))
        thread = (event["values"].get("sampledThread") or {}).get("javaName") or "?"
        threads[re.sub(r"-?\d+$", "-N", re.sub(r"#\d+", "#N", thread))] += 1
        joined = "\n".join(names)
        for label, prefix in PARTS:
            if prefix in joined:
                inclusive[label] += 1
        for name in names:
            if name.startswith("dev.idempotency."):
                self_sdk[name] += 1
                break
    print(f"{path}: {total} CPU samples")
    print("| part | share of samples (inclusive) |")
    print("|---|---|")
    for label, _ in PARTS:
        if inclusive[label]:
            print(f"| {label} | {100.0 * inclusive[label] / total:.1f}% |")
    print("\n| thread | share |\n|---|---|")
    for name, count in threads.most_common(8):
        print(f"| {name} | {100.0 * count / total:.1f}% |")
    print("\n| innermost SDK frame | share |\n|---|---|")
    for name, count in self_sdk.most_common(15):
        print(f"| {name} | {100.0 * count / total:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1])
