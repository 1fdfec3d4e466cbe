-- wrk request generator for keygate's benchmark.
-- Arguments (after --): PAIRS_FILE MODE [HEADER_NAME HEADER_VALUE]
--   PAIRS_FILE: lines "api_key token email"
--   MODE: query | bearer | issue-json | issue-xml | introspect | zipf
--   zipf: like query, but each request picks its entry by a Zipf-like popularity (HEADER_NAME is
--   then the exponent, e.g. 1.0): the file's first line is the most popular
--   introspect: POST token=<token> to the URL's path with the caller's credentials in
--   HEADER_NAME: HEADER_VALUE (keygate's X-Api-Key, or the peer's Authorization: Basic)
local entries = {}
local mode = "query"
local index = 0
local callerHeader = {}
local cdf = {}
zipfAlpha = 1.0

function init(args)
  mode = args[2] or "query"
  if mode == "zipf" then
    zipfAlpha = tonumber(args[3] or "1.0")
  elseif args[3] then
    callerHeader[args[3]] = args[4]
    callerHeader["Content-Type"] = "application/x-www-form-urlencoded"
    callerHeader["Accept"] = "application/json"
  end
  for line in io.lines(args[1]) do
    local key, token, email = line:match("^(%S+) (%S+) (%S+)$")
    entries[#entries + 1] = { key = key, token = token, email = email }
  end
  -- Each wrk thread starts at a different offset.
  index = math.random(#entries)
  if mode == "zipf" then
    local sum = 0
    for rank = 1, #entries do
      sum = sum + 1 / rank ^ zipfAlpha
      cdf[rank] = sum
    end
    for rank = 1, #entries do cdf[rank] = cdf[rank] / sum end
  end
end

-- The entry whose cumulative popularity first reaches a uniform draw (binary search).
local function pickZipf()
  local u = math.random()
  local lo, hi = 1, #cdf
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cdf[mid] < u then lo = mid + 1 else hi = mid end
  end
  return entries[lo]
end

local secure = "/api/secure/userservice/tokens/current"
local password = "bench password"

function request()
  index = index % #entries + 1
  local e = entries[index]
  if mode == "zipf" then
    e = pickZipf()
    return wrk.format("GET", secure .. "?api_key=" .. e.key .. "&api_token=" .. e.token)
  elseif mode == "query" then
    return wrk.format("GET", secure .. "?api_key=" .. e.key .. "&api_token=" .. e.token)
  elseif mode == "bearer" then
    return wrk.format("GET", secure, { ["Authorization"] = "Bearer " .. e.token, ["X-Api-Key"] = e.key })
  elseif mode == "introspect" then
    return wrk.format("POST", wrk.path, callerHeader, "token=" .. e.token)
  elseif mode == "issue-json" then
    local body = '{"auth_request":{"user":{"email":"' .. e.email .. '","password":"' .. password ..
      '"},"api_key":"' .. e.key .. '"}}'
    return wrk.format("POST", "/api/userservice/tokens",
      { ["Content-Type"] = "application/json", ["Accept"] = "application/json" }, body)
  else
    local body = "<auth_request><user><email>" .. e.email .. "</email><password>" .. password ..
      "</password></user><api_key>" .. e.key .. "</api_key></auth_request>"
    return wrk.format("POST", "/api/userservice/tokens", { ["Content-Type"] = "application/xml" }, body)
  end
end

function done(summary, latency, requests)
  -- Non-2xx responses make a run invalid; print them so the driver can check.
  io.write("errors.status ", summary.errors.status, "\n")
  io.write("errors.connect ", summary.errors.connect, "\n")
  io.write("errors.timeout ", summary.errors.timeout, "\n")
end
