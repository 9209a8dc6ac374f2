package pgtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestZZ(t *testing.T) {
	d := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, d.DSN)
	if err != nil { t.Fatal(err) }
	run := func(q string) {
		s := time.Now()
		_, err := conn.Exec(ctx, q)
		t.Logf("%s %s %v", q, time.Since(s), err)
	}
	for i := 0; i < 6; i++ { run(fmt.Sprintf("create database zz%d", i)) }
	for i := 0; i < 6; i++ { run(fmt.Sprintf("drop database zz%d", i)) }
	run("select pg_current_wal_lsn()")
	for i := 0; i < 3; i++ { run(fmt.Sprintf("create database zz%d strategy file_copy", i)) }
	for i := 0; i < 3; i++ { run(fmt.Sprintf("drop database zz%d", i)) }
	for i := 0; i < 6; i++ { run(fmt.Sprintf("create database zz%d", i)) }
	for i := 0; i < 6; i++ { run(fmt.Sprintf("drop database zz%d", i)) }
	var n int64
	conn.QueryRow(ctx, "select pg_database_size('template1')").Scan(&n)
	t.Log(n)
}
