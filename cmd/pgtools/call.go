package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner/config"
)

func cmdCall(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", cmp.Or(getenv("PGTOOLS_URL"), "http://"+config.DefaultListen), "runner URL; env PGTOOLS_URL")
	token := fs.String("token", "", "API token; env PGTOOLS_TOKEN")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pgtools call [flags] <tool> ['<json arguments>' | -]

Calls a tool on a running pgtools server and prints its JSON answer. Exits 1 when the
answer is an error. With - the arguments are read from standard input.

Examples:
  pgtools call describe_schema
  pgtools call select_query '{"table":"orders","where":"status = $1","params":["paid"],"limit":5}'

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	tool := fs.Arg(0)
	body := []byte("{}")
	if fs.NArg() == 2 {
		if fs.Arg(1) == "-" {
			b, err := io.ReadAll(os.Stdin)
			if err != nil {
				fmt.Fprintf(stderr, "pgtools call: reading standard input: %v\n", err)
				return 2
			}
			body = b
		} else {
			body = []byte(fs.Arg(1))
		}
	}
	if !json.Valid(body) {
		fmt.Fprintln(stderr, "pgtools call: the arguments are not valid JSON; quote them for the shell, e.g. '{\"table\":\"orders\"}'")
		return 2
	}
	tok := cmp.Or(*token, getenv("PGTOOLS_TOKEN"))
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(*url, "/")+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "pgtools call: %v\n", err)
		return 2
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools call: cannot reach the runner at %s: is pgtools serve running? (%v)\n", *url, err)
		return 1
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools call: reading the answer: %v\n", err)
		return 1
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = append(pretty.Bytes(), '\n')
	}
	_, _ = stdout.Write(out)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
