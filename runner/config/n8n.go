package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools"
)

// N8NConfig is the config file's "n8n": the task brokers serve joins as their external task
// runner, and as whom their tasks run. The flags --n8n-broker, --n8n-broker-token-file,
// --n8n-principal, --n8n-role, --n8n-act-as and the environment's PGTOOLS_N8N_BROKERS and
// N8N_RUNNERS_AUTH_TOKEN give the same keys (cmd/pgtools). runner.Build joins the brokers.
type N8NConfig struct {
	// Brokers are the brokers' base URLs, one per n8n process (BrokerURL says which are
	// accepted). Defaults to none: no broker is joined.
	Brokers []string `json:"brokers"`
	// TokenFile is a file holding the brokers' auth token, read into Token at load. Defaults to
	// none.
	TokenFile string `json:"token_file,omitempty"`
	// Token is the brokers' auth token, the N8N_RUNNERS_AUTH_TOKEN n8n runs with (from
	// token_file, the environment, or the key itself). A secret: never logged, and printed as
	// "[REDACTED]". Defaults to none; joining a broker needs it.
	Token string `json:"token,omitempty"`
	// Principal is the principal broker tasks run as, with scopes read and write; it owns the
	// sessions they open and must not be an API token's name. Defaults to DefaultN8NPrincipal.
	Principal string `json:"principal"`
	// Role is the PostgreSQL role broker tasks run as, checked at start like a token's role.
	// Defaults to none: the login role.
	Role string `json:"role"`
	// ActAs lets a task name an end user it acts for. Defaults to false.
	ActAs bool `json:"act_as"`
	// TaskTimeoutMS is n8n's N8N_RUNNERS_TASK_TIMEOUT in milliseconds; a task's call ends with a
	// timeout answer before it. At least 1000. Defaults to DefaultN8NTaskTimeoutMS.
	TaskTimeoutMS int64 `json:"task_timeout_ms"`
}

// TaskTimeout is TaskTimeoutMS as a duration.
func (n N8NConfig) TaskTimeout() time.Duration {
	return time.Duration(n.TaskTimeoutMS) * time.Millisecond
}

// Joins reports whether any broker is configured.
func (n N8NConfig) Joins() bool { return len(n.Brokers) > 0 }

// TaskPrincipal is who every broker task runs as: Principal with scopes read and write, as Role.
func (n N8NConfig) TaskPrincipal() tools.Principal {
	return tools.Principal{Name: n.Principal, Scopes: []string{"read", "write"}, Role: n.Role}
}

// callers are the broker principal's roles for the start-up check of grants: none without a
// broker; with act_as its role is shared by the subjects tasks name.
func (n N8NConfig) callers() []ExtraCaller {
	if !n.Joins() {
		return nil
	}
	by := "n8n broker principal " + n.Principal
	out := []ExtraCaller{{Name: by, Role: n.Role}}
	if n.ActAs {
		out = append(out, ExtraCaller{Name: by + " (act_as)", Role: n.Role, Shared: true})
	}
	return out
}

// n8nProblems checks the n8n object of a configuration whose defaults are filled.
func (c *Config) n8nProblems() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	n := c.N8N
	if n.TaskTimeoutMS < 1000 {
		add("n8n.task_timeout_ms: %d is below 1000; set it to the N8N_RUNNERS_TASK_TIMEOUT n8n runs with, in milliseconds (60 there is 60000 here)", n.TaskTimeoutMS)
	}
	if n.Role != "" && !validRoleName(n.Role) {
		add("n8n.role: %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", n.Role)
	}
	if !n.Joins() {
		return problems
	}
	for i, u := range n.Brokers {
		if _, err := BrokerURL(u); err != nil {
			add("n8n.brokers[%d]: %v", i, err)
		} else if slices.Contains(n.Brokers[:i], u) {
			add("n8n.brokers[%d]: %s is listed twice", i, u)
		}
	}
	if n.Token == "" {
		add("n8n.brokers: joining n8n brokers needs the brokers' auth token: set N8N_RUNNERS_AUTH_TOKEN to the value n8n runs with, pass --n8n-broker-token-file, or set n8n.token_file in the config file")
	}
	for _, t := range c.Tokens {
		if t.Name == n.Principal {
			add("n8n.principal: %q is also the name of %s, so the two would share sessions; choose another name", n.Principal, tokenWhere(t))
			break
		}
	}
	return problems
}

// BrokerURL parses an n8n task broker's base URL and fills in the default path "/runners"
// (n8n's N8N_RUNNERS_PATH): http or https (ws and wss are read as those), without credentials,
// query or fragment. The error never echoes a URL that does not parse, which may hold
// credentials.
func BrokerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, errors.New("an n8n broker URL is not a URL like http://127.0.0.1:5679")
	}
	switch u.Scheme {
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("n8n broker URL %q: the scheme must be http or https", u.Redacted())
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("n8n broker URL %q must have no credentials, query or fragment; give the auth token in N8N_RUNNERS_AUTH_TOKEN", u.Redacted())
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if u.Path == "" {
		u.Path = "/runners"
	}
	u.RawPath = ""
	return u, nil
}
