-- wrk script for bench-compare.sh: every request carries a different token (a different user), taken in turn
-- from the file named by the BENCH_TOKENS environment variable (one token per line). Requests are built once
-- in init(), so wrk spends no Lua time per request beyond returning a prepared string.
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
    for token in io.lines(path) do
        if #token > 0 then
            count = count + 1
            requests[count] = wrk.format("GET", wrk.path, { ["Authorization"] = "Bearer " .. token })
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
