package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The registry's clock: a replica beats every Heartbeat and is dead once its last beat is
// older than DefaultDead, so a replica that stops beating (killed, cut off) is dead within
// DefaultDead and one missed or slow beat never makes a live replica look dead.
const (
	Heartbeat   = 3 * time.Second
	DefaultDead = 5 * Heartbeat
	// forgetAfter is how long a dead replica stays known (Owner answers it as not live);
	// after that Owner answers ErrNoReplica.
	forgetAfter = 24 * time.Hour
)

// registerLock is the first key of the advisory lock Register takes per tag.
const registerLock = 0x70677473 // "pgts"

// ErrNoReplica is Owner's answer for a tag no replica registered (or one forgotten a day after
// it died).
var ErrNoReplica = errors.New("no replica holds this tag")

// ErrTagTaken is wrapped by Register's refusal of a tag a live replica with another id holds.
var ErrTagTaken = errors.New("the replica tag is held by another live replica")

// Replica is one runner of the fleet as the registry knows it: its id (replica_id), the tag
// its session ids start with, the address other replicas reach it at, when it started and when
// it last beat, by the database's clock.
type Replica struct {
	ID, Tag, Address string
	Started, Seen    time.Time
}

const replicaCols = `replica_id, tag, address, started, heartbeat`

func scanReplica(row pgx.Row) (Replica, error) {
	var r Replica
	err := row.Scan(&r.ID, &r.Tag, &r.Address, &r.Started, &r.Seen)
	return r, err
}

// Register records this process as replica r (ID, Tag, Address; the times are the database's)
// and refuses, wrapping ErrTagTaken, when a live replica with another id holds r.Tag. A replica
// registering again under its own id (a restarted pod) takes its row over. Run keeps it alive
// and Deregister removes it.
func (s *State) Register(ctx context.Context, r Replica) error {
	if r.ID == "" || r.Tag == "" {
		return fmt.Errorf("registering a replica: it needs an id and a tag")
	}
	var got Replica
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One registration per tag at a time: two replicas claiming a tag at once see each other.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(registerLock), r.Tag); err != nil {
			return err
		}
		var other string
		err := tx.QueryRow(ctx, `SELECT replica_id FROM `+s.schema+`.replicas
			WHERE tag = $1 AND replica_id <> $2 AND heartbeat > now() - make_interval(secs => $3) LIMIT 1`,
			r.Tag, r.ID, s.dead.Seconds()).Scan(&other)
		if err == nil {
			return fmt.Errorf("replica %s may not take tag %s: live replica %s holds it (its heartbeat is younger than %s). Give this replica another replica_id, or stop %s first: %w",
				r.ID, r.Tag, other, s.dead, other, ErrTagTaken)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.schema+`.replicas WHERE tag = $1 AND replica_id <> $2`, r.Tag, r.ID); err != nil {
			return err
		}
		got, err = scanReplica(tx.QueryRow(ctx, `INSERT INTO `+s.schema+`.replicas (`+replicaCols+`) VALUES ($1, $2, $3, now(), now())
			ON CONFLICT (replica_id) DO UPDATE SET tag = excluded.tag, address = excluded.address, started = excluded.started, heartbeat = excluded.heartbeat
			RETURNING `+replicaCols, r.ID, r.Tag, r.Address))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrTagTaken) {
			return err
		}
		return fmt.Errorf("registering replica %s in state schema %s: %w", r.ID, s.name, err)
	}
	s.mu.Lock()
	s.reg = &got
	s.mu.Unlock()
	return nil
}

// Beat records that the registered replica is alive (registering it again if its row was
// removed meanwhile) and forgets replicas dead for a day.
func (s *State) Beat(ctx context.Context) error {
	s.mu.Lock()
	r := s.reg
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.schema+`.replicas SET heartbeat = now() WHERE replica_id = $1 AND tag = $2`, r.ID, r.Tag)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		if err := s.Register(ctx, *r); err != nil {
			return err
		}
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.replicas WHERE heartbeat < now() - make_interval(secs => $1)`, forgetAfter.Seconds())
	return err
}

// Run beats every Heartbeat until ctx ends; onError receives the beats that failed (the state
// database down: the replica looks dead to the others until a beat succeeds again).
func (s *State) Run(ctx context.Context, onError func(error)) {
	t := time.NewTicker(Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			bctx, cancel := context.WithTimeout(ctx, Heartbeat)
			if err := s.Beat(bctx); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
			cancel()
		}
	}
}

// Deregister removes this process's replica from the registry (a clean stop).
func (s *State) Deregister(ctx context.Context) error {
	s.mu.Lock()
	r := s.reg
	s.reg = nil
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.replicas WHERE replica_id = $1 AND tag = $2`, r.ID, r.Tag)
	return err
}

// Replicas are the live replicas, by id.
func (s *State) Replicas(ctx context.Context) ([]Replica, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+replicaCols+` FROM `+s.schema+`.replicas
		WHERE heartbeat > now() - make_interval(secs => $1) ORDER BY replica_id`, s.dead.Seconds())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) { return scanReplica(row) })
}

// Owner is the replica that holds tag and whether it is live; err is ErrNoReplica when no
// replica registered tag (or it was forgotten).
func (s *State) Owner(ctx context.Context, tag string) (r Replica, live bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT `+replicaCols+`, heartbeat > now() - make_interval(secs => $2) FROM `+s.schema+`.replicas
		WHERE tag = $1 ORDER BY heartbeat DESC LIMIT 1`, tag, s.dead.Seconds()).Scan(&r.ID, &r.Tag, &r.Address, &r.Started, &r.Seen, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return Replica{}, false, ErrNoReplica
	}
	return r, live, err
}
