package state

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// The approvals page's sign-ins, shared by the fleet so that an approver signed in through one
// replica is signed in on every one. A sign-in is keyed by the SHA-256 of its cookie's random
// id (the id itself is never stored) and holds the principal as the page resolved it (JSON the
// caller encodes: names, scopes, claims; never a token's secret), the sign-in's CSRF token, its
// end, and the outcome of the last decision, shown once.

// SignIn is one stored sign-in.
type SignIn struct {
	Principal []byte // JSON
	CSRF      string
	Expires   time.Time
}

// PutSignIn stores a sign-in under key, dropping the sign-ins that have ended.
func (s *State) PutSignIn(ctx context.Context, key [32]byte, in SignIn) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.schema+`.signins WHERE expires <= now()`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s.schema+`.signins (key, principal, csrf, expires) VALUES ($1, $2, $3, $4)
			ON CONFLICT (key) DO UPDATE SET principal = excluded.principal, csrf = excluded.csrf, expires = excluded.expires, flash = '', flash_error = false`,
			key[:], string(in.Principal), in.CSRF, in.Expires)
		return err
	})
}

// GetSignIn is the sign-in stored under key, if it has not ended.
func (s *State) GetSignIn(ctx context.Context, key [32]byte) (SignIn, bool, error) {
	var in SignIn
	var principal string
	err := s.pool.QueryRow(ctx, `SELECT principal::text, csrf, expires FROM `+s.schema+`.signins WHERE key = $1 AND expires > now()`, key[:]).
		Scan(&principal, &in.CSRF, &in.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return SignIn{}, false, nil
	}
	if err != nil {
		return SignIn{}, false, err
	}
	in.Principal = []byte(principal)
	return in, true, nil
}

// DeleteSignIn ends the sign-in stored under key.
func (s *State) DeleteSignIn(ctx context.Context, key [32]byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.signins WHERE key = $1`, key[:])
	return err
}

// SetFlash records the outcome of the sign-in's last decision.
func (s *State) SetFlash(ctx context.Context, key [32]byte, msg string, isErr bool) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.signins SET flash = $2, flash_error = $3 WHERE key = $1`, key[:], msg, isErr)
	return err
}

// TakeFlash returns the outcome of the sign-in's last decision and clears it, so that the
// next page (on whichever replica) shows it once.
func (s *State) TakeFlash(ctx context.Context, key [32]byte) (msg string, isErr bool, err error) {
	err = s.pool.QueryRow(ctx, `UPDATE `+s.schema+`.signins n SET flash = '', flash_error = false
		FROM (SELECT key, flash, flash_error FROM `+s.schema+`.signins WHERE key = $1 FOR UPDATE) o
		WHERE n.key = o.key RETURNING o.flash, o.flash_error`, key[:]).Scan(&msg, &isErr)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return msg, isErr, err
}
