package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/approval"
)

// Approvals is the approval.Backend that keeps requests as rows of the state's approvals table:
// every replica over the same state sees, decides and claims the same requests, a restart
// forgets none, and every time (created, expires, decided, a claim's age) is the database's
// now(). Races are decided by single conditional statements: two claims of one approval are
// two UPDATE … WHERE claim IS NULL, and PostgreSQL's row lock lets exactly one match.
func (s *State) Approvals() approval.Backend { return approvals{s} }

type approvals struct{ s *State }

func (approvals) Shared() bool { return true }

const approvalCols = `id, status, principal, credential, database, tool, digest, arguments::text, effect::text, rules,
	created, expires, approver, decided, measured::text, claim`

func scanApproval(row pgx.Row) (approval.Record, error) {
	var r approval.Record
	var args, approver, measured, claim *string
	var effect string
	var status string
	err := row.Scan(&r.ID, &status, &r.Principal, &r.Credential, &r.Database, &r.Tool, &r.Digest, &args, &effect, &r.Rules,
		&r.Created, &r.Expires, &approver, &r.Decided, &measured, &claim)
	if err != nil {
		return r, err
	}
	r.Status = approval.Status(status)
	if args != nil {
		r.Arguments = json.RawMessage(*args)
	}
	if r.Effect, err = approval.DecodeEffect([]byte(effect)); err != nil {
		return r, fmt.Errorf("approval %s: its effect: %w", r.ID, err)
	}
	if approver != nil {
		r.Approver = *approver
	}
	if measured != nil {
		m, err := approval.DecodeEffect([]byte(*measured))
		if err != nil {
			return r, fmt.Errorf("approval %s: its measured effect: %w", r.ID, err)
		}
		r.Measured = &m
	}
	if claim != nil {
		r.Claim = *claim
	}
	return r, nil
}

func collect(rows pgx.Rows, err error) ([]approval.Record, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (approval.Record, error) { return scanApproval(row) })
}

// one reads the single row a statement returns: ok false when none.
func one(row pgx.Row) (approval.Record, bool, error) {
	r, err := scanApproval(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return approval.Record{}, false, nil
	}
	return r, err == nil, err
}

func (a approvals) Sweep(ctx context.Context, ttl, hold time.Duration) ([]approval.Record, error) {
	// A claim older than hold belongs to a call that died: the request ends as expired with the
	// claim kept, so that the call, should it still finish, records its outcome.
	recs, err := collect(a.s.pool.Query(ctx, `UPDATE `+a.s.schema+`.approvals SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND claim IS NULL AND expires <= now()
		   OR status = 'approved' AND claim IS NOT NULL AND claimed_at <= now() - make_interval(secs => $1)
		RETURNING `+approvalCols, hold.Seconds()))
	if err != nil {
		return nil, err
	}
	_, err = a.s.pool.Exec(ctx, `DELETE FROM `+a.s.schema+`.approvals
		WHERE status NOT IN ('pending', 'approved') AND expires < now() - make_interval(secs => $1)`, ttl.Seconds())
	return recs, err
}

func (a approvals) Insert(ctx context.Context, r approval.Record, ttl time.Duration, max int) (approval.Record, int, error) {
	var added approval.Record
	n := 0
	err := pgx.BeginFunc(ctx, a.s.pool, func(tx pgx.Tx) error {
		// One insert per credential at a time, so that the count below bounds the fleet's.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(approvalLock), r.Credential); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+a.s.schema+`.approvals WHERE status = 'pending' AND credential = $1`, r.Credential).Scan(&n); err != nil {
			return err
		}
		if n >= max {
			return nil
		}
		var args any
		if r.Arguments != nil {
			args = string(r.Arguments)
		}
		var err error
		added, err = scanApproval(tx.QueryRow(ctx, `INSERT INTO `+a.s.schema+`.approvals
			(id, status, principal, credential, database, tool, digest, arguments, effect, rules, created, expires)
			VALUES ($1, 'pending', $2, $3, $4, $5, $6, $7::json, $8::jsonb, $9, now(), now() + make_interval(secs => $10))
			RETURNING `+approvalCols, r.ID, r.Principal, r.Credential, r.Database, r.Tool, r.Digest, args,
			string(approval.EncodeEffect(r.Effect)), nonNil(r.Rules), ttl.Seconds()))
		return err
	})
	return added, n, err
}

// approvalLock is the first key of the advisory lock Insert takes per credential.
const approvalLock = 0x70676170 // "pgap"

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a approvals) Get(ctx context.Context, id string) (approval.Record, bool, error) {
	return one(a.s.pool.QueryRow(ctx, `SELECT `+approvalCols+` FROM `+a.s.schema+`.approvals WHERE id = $1`, id))
}

func (a approvals) Pending(ctx context.Context) ([]approval.Record, error) {
	return collect(a.s.pool.Query(ctx, `SELECT `+approvalCols+` FROM `+a.s.schema+`.approvals WHERE status = 'pending' ORDER BY created`))
}

func (a approvals) CountPending(ctx context.Context) (int, error) {
	var n int
	err := a.s.pool.QueryRow(ctx, `SELECT count(*) FROM `+a.s.schema+`.approvals WHERE status = 'pending'`).Scan(&n)
	return n, err
}

// current is request id as it stands, for a conditional change that did not match.
func (a approvals) current(ctx context.Context, id string) (approval.Record, bool, error) {
	r, _, err := a.Get(ctx, id)
	return r, false, err
}

func (a approvals) Decide(ctx context.Context, id, approver string, approve bool, ttl time.Duration) (approval.Record, bool, error) {
	r, ok, err := one(a.s.pool.QueryRow(ctx, `UPDATE `+a.s.schema+`.approvals
		SET status = CASE WHEN $3 THEN 'approved' ELSE 'denied' END, approver = $2, decided = now(),
		    expires = CASE WHEN $3 THEN now() + make_interval(secs => $4) ELSE expires END
		WHERE id = $1 AND status = 'pending' AND expires > now()
		RETURNING `+approvalCols, id, approver, approve, ttl.Seconds()))
	if err != nil || ok {
		return r, ok, err
	}
	return a.current(ctx, id)
}

func (a approvals) Claim(ctx context.Context, id, token string) (approval.Record, bool, error) {
	r, ok, err := one(a.s.pool.QueryRow(ctx, `UPDATE `+a.s.schema+`.approvals SET claim = $2, claimed_at = now()
		WHERE id = $1 AND status = 'approved' AND claim IS NULL AND expires > now()
		RETURNING `+approvalCols, id, token))
	if err != nil || ok {
		return r, ok, err
	}
	return a.current(ctx, id)
}

func (a approvals) Finish(ctx context.Context, id, token string, status approval.Status, measured *approval.Effect) (approval.Record, error) {
	if status == approval.Approved {
		r, _, err := one(a.s.pool.QueryRow(ctx, `UPDATE `+a.s.schema+`.approvals SET claim = NULL, claimed_at = NULL
			WHERE id = $1 AND claim = $2 RETURNING `+approvalCols, id, token))
		return r, err
	}
	var m any
	if measured != nil {
		m = string(approval.EncodeEffect(*measured))
	}
	// The call ran: its outcome is recorded even when the claim outlived ClaimHold meanwhile.
	r, _, err := one(a.s.pool.QueryRow(ctx, `UPDATE `+a.s.schema+`.approvals SET status = $3, measured = $4::jsonb, claim = NULL, claimed_at = NULL
		WHERE id = $1 AND claim = $2 RETURNING `+approvalCols, id, token, string(status), m))
	return r, err
}
