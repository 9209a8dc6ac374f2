package pgtest

import (
	"fmt"
	"net/url"
	"strings"
)

// withDatabase returns dsn pointed at database dbname. dsn is a URL
// (postgres://…) or keyword/value ("host=… user=…") connection string.
func withDatabase(dsn, dbname string) (string, error) {
	return rewriteDSN(dsn, map[string]string{"dbname": dbname})
}

// withUser returns dsn logging in as user with password (empty: none).
func withUser(dsn, user, password string) (string, error) {
	return rewriteDSN(dsn, map[string]string{"user": user, "password": password})
}

// rewriteDSN sets the keys dbname, user and password of a connection string.
func rewriteDSN(dsn string, set map[string]string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			// url.Parse errors quote the whole URL, password included.
			return "", fmt.Errorf("pgtest: connection string is not a valid URL")
		}
		q := u.Query()
		for k, v := range set {
			// Query parameters override the URL's parts in pgconn: drop them.
			q.Del(k)
			switch k {
			case "dbname":
				u.Path, u.RawPath = "/"+v, ""
			case "user":
				if pw, ok := set["password"]; ok && pw != "" {
					u.User = url.UserPassword(v, pw)
				} else {
					u.User = url.User(v)
				}
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// Keyword/value: pgconn lets a later keyword win, so append.
	var b strings.Builder
	b.WriteString(dsn)
	for _, k := range []string{"dbname", "user", "password"} {
		if v, ok := set[k]; ok {
			fmt.Fprintf(&b, " %s='%s'", k, strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v))
		}
	}
	return b.String(), nil
}
