package tools

import (
	"context"
	"fmt"
)

// The PostgreSQL majors pgtools supports and tests on (make test-matrix; docs/postgres-versions.md).
const (
	OldestMajor = 14
	NewestMajor = 18
)

// ServerInfo is the version of the server a Database connects to.
type ServerInfo struct {
	Version string // server_version, e.g. "17.10"
	Num     int    // server_version_num, e.g. 171000
}

// Server reads the version of db's server.
func Server(ctx context.Context, db *Database) (ServerInfo, error) {
	var s ServerInfo
	err := db.Pool.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('server_version_num')::int").Scan(&s.Version, &s.Num)
	if err != nil {
		return s, fmt.Errorf("reading the server version of database %s: %w", db.Name, err)
	}
	return s, nil
}

// Major is the server's major version.
func (s ServerInfo) Major() int { return s.Num / 10000 }

// Lacks lists what pgtools uses that this server does not have, or that it was not tested on;
// none on the newest majors.
func (s ServerInfo) Lacks() []string {
	var out []string
	m := s.Major()
	if m < OldestMajor {
		out = append(out, fmt.Sprintf("PostgreSQL %d is older than the oldest major pgtools supports (%d); upgrade the server", m, OldestMajor))
	}
	if m > NewestMajor {
		out = append(out, fmt.Sprintf("PostgreSQL %d is newer than the newest major pgtools is tested on (%d)", m, NewestMajor))
	}
	if m < 17 {
		out = append(out, "no transaction_timeout (PostgreSQL 17+): a pg_transaction's time bound is kept by its statements' statement_timeout and the runner's deadline only, without the server's own backstop")
	}
	if m < 16 {
		out = append(out, "no membership options (PostgreSQL 16+): every membership lets its member SET ROLE and inherit")
	}
	if m < 15 {
		out = append(out, "schema public grants CREATE to PUBLIC (changed in PostgreSQL 15): the role check names the REVOKE")
	}
	return out
}
