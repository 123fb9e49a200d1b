-- wrk script for bench/load.sh: POSTs demo jobs and counts the answers by
-- status, and the 503s that lack Retry-After.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"sleep_ms": 20, "iterations": 1000}'

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
  no_retry_after = 0
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if status == 503 and headers["Retry-After"] == nil and headers["retry-after"] == nil then
    no_retry_after = no_retry_after + 1
  end
end

function done(summary, latency, requests)
  local total = {}
  local missing = 0
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("counts")) do
      total[status] = (total[status] or 0) + n
    end
    missing = missing + t:get("no_retry_after")
  end
  local parts = {}
  for status, n in pairs(total) do
    table.insert(parts, string.format('"%d": %d', status, n))
  end
  table.sort(parts)
  io.write(string.format('WRK {"statuses": {%s}, "503_without_retry_after": %d, "socket_errors": %d}\n',
    table.concat(parts, ", "), missing,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
