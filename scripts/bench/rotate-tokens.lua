-- wrk script for bench-compare.sh: every request carries a different token (a different user), taken in turn
-- from the file named by the BENCH_TOKENS environment variable (one token per line). Requests are built once
-- in init(), so wrk spends no Lua time per request beyond returning a prepared string. BENCH_FIELDS, when set,
-- holds more fields to send with every request, one "Name: value" per line (bench-compare.sh --app-fields).
local requests = {}
local count = 0
local cursor = 0
local threads = 0

function setup(thread)
    thread:set("offset", threads * 7919)
    threads = threads + 1
end

function init(args)
    local path = os.getenv("BENCH_TOKENS")
    if path == nil then
        error("set BENCH_TOKENS to a file of tokens, one per line")
    end
    local fields = {}
    for line in (os.getenv("BENCH_FIELDS") or ""):gmatch("[^\n]+") do
        local name, value = line:match("^([^:]+):%s*(.*)$")
        if name == nil then
            error("BENCH_FIELDS: not a 'Name: value' line: " .. line)
        end
        fields[name] = value
    end
    for token in io.lines(path) do
        if #token > 0 then
            local headers = { ["Authorization"] = "Bearer " .. token }
            for name, value in pairs(fields) do
                headers[name] = value
            end
            count = count + 1
            requests[count] = wrk.format("GET", wrk.path, headers)
        end
    end
    if count == 0 then
        error("no tokens in " .. path)
    end
    cursor = (offset or 0) % count
end

function request()
    cursor = cursor % count + 1
    return requests[cursor]
end
