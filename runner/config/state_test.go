package config

import (
	"errors"
	"strings"
	"testing"
)

// TestStateConfig: state names a configured database, state_schema is a plain identifier
// (default pgtools), fleet.advertise_url is a base URL; each problem says what to give.
func TestStateConfig(t *testing.T) {
	t.Parallel()
	base := func() *Config {
		return &Config{Databases: map[string]DatabaseConfig{"default": {URL: "postgres://u@127.0.0.1/db"}, "ops": {URL: "postgres://u@127.0.0.1/ops"}}}
	}
	cfg := base()
	cfg.State = "ops"
	cfg.Fleet.AdvertiseURL = "http://pgtools-0.pgtools:8080"
	if err := cfg.Validate(); err != nil || cfg.StateSchema != DefaultStateSchema {
		t.Fatalf("a valid state: %v %q", err, cfg.StateSchema)
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.State = "nope" }, `state: names database "nope", which is not configured`},
		{func(c *Config) { c.State, c.StateSchema = "ops", `Bad"Name` }, `state_schema: "Bad\"Name" is not a lower-case identifier`},
		{func(c *Config) { c.Fleet.AdvertiseURL = "pgtools-0:8080" }, "fleet.advertise_url: \"pgtools-0:8080\" is not a base URL"},
		{func(c *Config) { c.Fleet.AdvertiseURL = "http://h:1/path?q" }, "is not a base URL; give http(s)://host:port"},
		{func(c *Config) { c.Fleet.AdvertiseURL = "http://user:pw@h:1" }, "is not a base URL"},
	} {
		cfg := base()
		c.set(cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(strings.Join(ce.Problems, "\n"), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}
