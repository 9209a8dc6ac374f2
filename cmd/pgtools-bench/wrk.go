package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

// wrkScript makes wrk POST a primary-key select_query with a random id per request.
const wrkScript = `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
request = function()
  return wrk.format(nil, nil, nil, '{"table":"customers","where":"id = $1","params":[' .. math.random(1, %d) .. ']}')
end
`

// wrkMCPScript makes wrk send the same read as a tools/call of protocol version v to /mcp, as
// mcpCallBody writes it, after the initialize or server/discover that mcpCaller sent once (a
// stateless server needs no session id).
func wrkMCPScript(v string) string {
	headers, meta := "", ""
	if perRequestMeta(v) {
		headers = `wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "select_query"
`
		meta = `"_meta":` + mcpMeta(v) + `,`
	}
	return `
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Protocol-Version"] = "` + v + `"
` + headers + `wrk.headers["Authorization"] = "Bearer %s"
request = function()
  return wrk.format(nil, nil, nil, '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `"name":"select_query","arguments":{"table":"customers","where":"id = $1","params":[' .. math.random(1, %d) .. ']}}}')
end
`
}

// wrkResult is what one wrk run reports.
type wrkResult struct {
	rps      float64
	p50, p99 float64 // ms
	requests int64
	errors   string
}

// runWrk drives url with wrk (a separate process, so the load generator's cost is not the
// runner's) for d with c connections on one thread, with script (wrkScript or wrkMCPScript).
func runWrk(ctx context.Context, script, url, token string, c int, d time.Duration) (*wrkResult, error) {
	f, err := os.CreateTemp("", "pgtools-wrk-*.lua")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	fmt.Fprintf(f, script, token, customers)
	f.Close()
	secs := max(1, int(d.Seconds()))
	cmd := exec.CommandContext(ctx, "wrk", "-t1", "-c"+strconv.Itoa(c), "-d"+strconv.Itoa(secs)+"s", "--latency", "-s", f.Name(), url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("wrk: %v: %s", err, out)
	}
	r := &wrkResult{}
	if m := regexp.MustCompile(`Requests/sec:\s+([\d.]+)`).FindSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := regexp.MustCompile(`(\d+) requests in`).FindSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	r.p50 = wrkLatency(out, "50%")
	r.p99 = wrkLatency(out, "99%")
	if m := regexp.MustCompile(`(Non-2xx or 3xx responses: \d+|Socket errors:[^\n]+)`).FindSubmatch(out); m != nil {
		r.errors = string(m[1])
	}
	if r.rps == 0 {
		return nil, fmt.Errorf("wrk printed no rate: %s", out)
	}
	return r, nil
}

// wrkLatency parses a line of wrk's latency distribution ("50%  123.00us") into ms.
func wrkLatency(out []byte, pct string) float64 {
	m := regexp.MustCompile(`\s` + regexp.QuoteMeta(pct) + `\s+([\d.]+)(us|ms|s)`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	switch string(m[2]) {
	case "us":
		return v / 1000
	case "s":
		return v * 1000
	}
	return v
}
