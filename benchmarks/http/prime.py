#!/usr/bin/env python3
"""Stores the fixed keys of replay.lua before a replay run: one request per key, on one connection.
Usage: prime.py <url> <run id> [keys]"""
import http.client
import sys
import urllib.parse

url, run = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
parts = urllib.parse.urlsplit(url)
connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
body = '{"to":"+15550100","template":"otp","code":"123456"}'
for i in range(1, count + 1):
    connection.request("POST", parts.path, body, {
        "Content-Type": "application/json", "Idempotency-Key": f"{run}-fixed-{i:012d}"})
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        sys.exit(f"priming key {i}: status {response.status}")
