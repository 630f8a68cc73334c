-- wrk script: POST with an Idempotency-Key taken in turn from a fixed set of 1,000 (replays, once prime.py has stored them).
-- wrk ... -s replay.lua <url> -- <run id>
local threads = {}
local counter = 0
local prefix = "run"
local body = '{"to":"+15550100","template":"otp","code":"123456"}'

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  keys = (args[1] or "run") .. "-fixed-"
  sent, other, replayed = 0, 0, 0
end

function request()
  counter = counter % 1000 + 1
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = string.format("%s%012d", keys, counter)
  }, body)
end

function response(status, headers, body)
  if status ~= 200 then other = other + 1 end
  if headers["Idempotent-Replayed"] then replayed = replayed + 1 end
end

function done(summary, latency, requests)
  local not200, replays = 0, 0
  for _, t in ipairs(threads) do
    not200 = not200 + t:get("other")
    replays = replays + t:get("replayed")
  end
  io.write(string.format("RESULT rps=%.1f p50_ms=%.3f p99_ms=%.3f requests=%d not200=%d replayed=%d socket_errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.requests, not200, replays,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
