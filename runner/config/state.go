package config

import (
	"net/url"
	"regexp"
	"strconv"
)

// DefaultStateSchema is Config.StateSchema when unset.
const DefaultStateSchema = "pgtools"

var stateSchemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// stateProblems checks state (a configured database), state_schema and fleet.
func (c *Config) stateProblems() []string {
	var problems []string
	if c.State != "" {
		if _, ok := c.Databases[c.State]; !ok {
			problems = append(problems, "state: names database "+quoteName(c.State)+", which is not configured; name one of databases (its login role keeps pgtools' fleet state in schema "+c.StateSchema+"), or leave state unset to keep approvals in this runner's memory")
		}
	}
	if !stateSchemaName.MatchString(c.StateSchema) {
		problems = append(problems, "state_schema: "+quoteName(c.StateSchema)+" is not a lower-case identifier; use letters, digits and _ (default pgtools)")
	}
	if u := c.Fleet.AdvertiseURL; u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.User != nil {
			problems = append(problems, "fleet.advertise_url: "+quoteName(u)+" is not a base URL; give http(s)://host:port, e.g. http://pgtools-0.pgtools:8080")
		}
	}
	return problems
}

func quoteName(s string) string { return strconv.Quote(s) }
