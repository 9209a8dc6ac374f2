package config

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ConnSummary is what may be shown of a connection string: where it connects and how, never the
// password or other parameters.
type ConnSummary struct {
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Database string `json:"database"`
	User     string `json:"user"`
	// TLS is the effective sslmode with what it checks, e.g. "verify-full (TLS; CA and host name
	// checked)".
	TLS string `json:"tls"`
	// RootCert is the sslrootcert setting (a file path or "system"), "" when unset.
	RootCert string `json:"sslrootcert,omitempty"`
	// Password says whether a password is configured (in the URL or password_file); never its value.
	Password string `json:"password"`
}

var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// parseDSN parses a connection string the way the pools will, with password (from password_file)
// replacing the URL's. Its errors never contain the connection string: pgx's parse errors quote
// it, so the problem is diagnosed here from the TLS settings, which are the usual culprits.
func parseDSN(dsn, password string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, dsnProblem(dsn)
	}
	if password != "" {
		cfg.Password = password
	}
	return cfg, nil
}

// dsnProblem explains why dsn does not parse, without quoting it.
func dsnProblem(dsn string) error {
	settings, ok := dsnSettings(dsn)
	if !ok {
		return fmt.Errorf("the connection string is not a valid URL; use postgres://user@host:5432/dbname?sslmode=verify-full (percent-encode special characters in the password, or use password_file)")
	}
	if mode, set := settings["sslmode"]; set && !slices.Contains(sslModes, mode) {
		return fmt.Errorf("sslmode %q is not one of %s", mode, strings.Join(sslModes, ", "))
	}
	if rc := settings["sslrootcert"]; rc != "" && rc != "system" {
		pem, err := os.ReadFile(rc)
		if err != nil {
			return fmt.Errorf("sslrootcert: cannot read the CA file %s: %v", rc, unwrapPathError(err))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return fmt.Errorf("sslrootcert: %s holds no PEM certificate; give the CA certificate that signed the server's", rc)
		}
	}
	for _, k := range []string{"sslcert", "sslkey"} {
		if f := settings[k]; f != "" {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("%s: cannot read %s: %v", k, f, unwrapPathError(err))
			}
		}
	}
	if (settings["sslcert"] == "") != (settings["sslkey"] == "") {
		return fmt.Errorf("sslcert and sslkey must be given together")
	}
	if p := settings["port"]; p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return fmt.Errorf("port %q is not a port number", p)
		}
	}
	return fmt.Errorf("not a valid PostgreSQL connection string; use postgres://user@host:5432/dbname?sslmode=verify-full or the key=value form (host=… dbname=… user=…)")
}

// dsnSettings extracts the non-secret settings that explain a parse failure: the query of a URL,
// or the pairs of the key=value form (quoting ignored). ok is false for a URL that does not parse.
func dsnSettings(dsn string) (map[string]string, bool) {
	out := map[string]string{}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, false
		}
		for k, v := range u.Query() {
			out[k] = v[0]
		}
		if p := u.Port(); p != "" {
			out["port"] = p
		}
		return out, true
	}
	for _, f := range strings.Fields(dsn) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out, true
}

// DescribeDSN summarizes a connection string for humans (check-config, startup logs): host, port,
// database, user and the effective TLS mode. The password is never included.
func DescribeDSN(dsn, password string) (ConnSummary, error) {
	cfg, err := parseDSN(dsn, password)
	if err != nil {
		return ConnSummary{}, err
	}
	s := ConnSummary{Host: cfg.Host, Port: cfg.Port, Database: cfg.Database, User: cfg.User, Password: "none"}
	if cfg.Password != "" {
		s.Password = "[REDACTED]"
	}
	for _, fb := range cfg.Fallbacks {
		if h := fb.Host + ":" + strconv.Itoa(int(fb.Port)); fb.Host != cfg.Host || fb.Port != cfg.Port {
			if !strings.Contains(s.Host, h) {
				s.Host += "," + h
			}
		}
	}
	settings, _ := dsnSettings(dsn)
	s.RootCert = settings["sslrootcert"]
	s.TLS = describeTLS(cfg)
	return s, nil
}

// describeTLS names the effective sslmode from what pgx built, so an unset sslmode shows as the
// default it stands for (prefer).
func describeTLS(cfg *pgconn.Config) string {
	plainFallback, tlsFallback := false, false
	for _, fb := range cfg.Fallbacks {
		if fb.Host == cfg.Host && fb.Port == cfg.Port {
			if fb.TLSConfig == nil {
				plainFallback = true
			} else {
				tlsFallback = true
			}
		}
	}
	t := cfg.TLSConfig
	switch {
	case t == nil && tlsFallback:
		return "allow (plaintext first, then TLS without verification)"
	case t == nil:
		return "disable (no TLS)"
	case plainFallback:
		return "prefer (TLS without verification, falls back to plaintext; use verify-full over a network)"
	case t.InsecureSkipVerify && t.VerifyPeerCertificate == nil:
		return "require (TLS; server certificate not verified)"
	case t.VerifyPeerCertificate != nil:
		return "verify-ca (TLS; CA checked, host name not)"
	}
	return "verify-full (TLS; CA and host name checked)"
}
