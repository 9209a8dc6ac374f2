package tools

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestServerLacks walks every major from one below the oldest supported to one above the newest:
// each gets exactly the notes of the features it misses.
func TestServerLacks(t *testing.T) {
	t.Parallel()
	for m := OldestMajor - 1; m <= NewestMajor+1; m++ {
		got := strings.Join(ServerInfo{Num: m * 10000}.Lacks(), "\n")
		for _, c := range []struct {
			text string
			want bool
		}{
			{"older than the oldest", m < OldestMajor},
			{"newer than the newest", m > NewestMajor},
			{"no transaction_timeout", m < 17},
			{"no membership options", m < 16},
			{"schema public grants CREATE", m < 15},
		} {
			if strings.Contains(got, c.text) != c.want {
				t.Errorf("PostgreSQL %d: %q reported = %v, want %v:\n%s", m, c.text, !c.want, c.want, got)
			}
		}
	}
}

// TestServerReadsTheVersion: the version read is the server's own, and the test server is one
// pgtools supports.
func TestServerReadsTheVersion(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	s, err := Server(context.Background(), b.tdb)
	if err != nil {
		t.Fatal(err)
	}
	if s.Num != pgtest.ServerVersionNum(t) || !strings.HasPrefix(s.Version, strconv.Itoa(s.Major())+".") {
		t.Fatalf("Server = %+v, server_version_num %d", s, pgtest.ServerVersionNum(t))
	}
	if m := s.Major(); m < OldestMajor || m > NewestMajor {
		t.Fatalf("tests run on PostgreSQL %d, outside %d-%d", m, OldestMajor, NewestMajor)
	}
}
