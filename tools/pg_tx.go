package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/words"
)

// pgTx is the session factory: begin, commit, rollback, savepoints, list.
func pgTx(ctx context.Context, req *request, a *txArgs) (Result, *Error) {
	const op = "pg_tx"
	if req.sessions == nil {
		return nil, sessionsUnavailable(op)
	}
	action, id := a.Action, a.SessionID
	// These rules live here rather than in the schema: a schema that combines alternatives at its
	// top level (if/then, oneOf) is flattened or refused by several agent frameworks.
	switch action {
	case "commit", "rollback", "savepoint", "release", "rollback_to":
		if id == "" {
			return nil, errorf(ErrInvalidArguments, fmt.Sprintf(`Pass the session_id that pg_tx begin returned, e.g. {"action":"%s","session_id":"…"}; pg_tx {"action":"list"} shows your sessions.`, action),
				"Invalid arguments: session_id is required for action %q", action)
		}
	}
	switch action {
	case "savepoint", "release", "rollback_to":
		if a.Name == "" {
			return nil, errorf(ErrInvalidArguments, fmt.Sprintf(`Name the savepoint, e.g. {"action":"%s","session_id":"%s","name":"before_update"}.`, action, id),
				"Invalid arguments: name is required for action %q", action)
		}
	}
	switch action {
	case "begin":
		opts := TxOptions{Isolation: a.IsolationLevel, ReadOnly: a.ReadOnly}
		began := time.Now()
		s, e := req.sessions.Begin(ctx, req.principal.Name, sessionTarget(req.principal, identityOf(req.principal).named(appName(appSession, req.principal.Name, req.tool)), req.db), opts)
		if e != nil {
			return nil, e
		}
		if s.Connect > 0 {
			phaseTook(ctx, "connect", began, s.Connect)
		}
		info := s.Info()
		hint := fmt.Sprintf("Pass session_id: '%s' to select_query, insert_data, update_data, delete_data and execute_sql; end it with pg_tx commit or rollback. It expires after %s without use.", s.ID, info.ExpiresIn)
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, ExpiresIn: info.ExpiresIn, Status: "open", Hint: hint}, nil
	case "list":
		list := []SessionInfo{}
		for _, s := range req.sessions.List(req.principal.Name) {
			list = append(list, s.Info())
		}
		data, _ := wire.Marshal(list)
		n := len(list)
		return &TxResult{Operation: op, Action: action, RowCount: &n, Sessions: data}, nil
	}
	s := req.session
	if s == nil {
		return nil, sessionsUnavailable(op) // Call resolves the session for these actions whenever sessions are enabled
	}
	pc := s.Conn().PgConn()
	cc := callContext{Database: req.db.Name}
	switch action {
	case "commit", "rollback":
		var err error
		// Both clear the session state the session's statements set before COMMIT or ROLLBACK:
		// behind a transaction pooler the server connection goes on to the next client then,
		// whatever happens to the session's connection afterwards.
		if action == "commit" {
			err = commit(ctx, pc)
		} else {
			err = wire.RollbackClean(context.WithoutCancel(ctx), pc)
		}
		// Read before Finish, which closes the connection: a commit that PostgreSQL refused (a
		// deferred constraint) is not a lost connection.
		gone := pc.IsClosed()
		req.sessions.Finish(s)
		if errors.Is(err, errCommitUnknown) {
			return nil, &Error{Type: ErrCommitOutcomeUnknown, Message: fmt.Sprintf("The COMMIT of session %s was sent, but its answer never arrived: the transaction may or may not have committed", s.ID),
				Suggestion: "Check with select_query whether the session's changes are in the database before redoing them."}
		}
		if err != nil && (gone || connectionEnded(err)) {
			// The backend was gone (terminated, crashed, restarted) before it could commit:
			// PostgreSQL rolled the transaction back. Retrying the commit cannot help.
			return nil, sessionLost(s)
		}
		if err != nil {
			e := classify(ctx, err, cc, req.db.Policy.MasksErrorValues())
			e.Message += "; the session has ended and nothing of it was committed"
			return nil, e
		}
		if action == "commit" && s.ChangedSchema.Load() {
			req.db.cat.Invalidate() // the session's DDL is visible now: describe_schema and suggestions must see it
		}
		status := map[string]string{"commit": "committed", "rollback": "rolled_back"}[action]
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, Status: status,
			Hint: fmt.Sprintf("Session %s is %s and closed.", s.ID, strings.ReplaceAll(status, "_", " "))}, nil
	default: // savepoint, release, rollback_to
		name := a.Name
		if strings.HasPrefix(strings.ToLower(name), "pgtools_") {
			return nil, errorf(ErrInvalidArguments, "Choose a savepoint name that does not start with pgtools_.", "Invalid arguments: savepoint names starting with pgtools_ are reserved")
		}
		var err error
		switch action {
		case "savepoint":
			err = s.Savepoint(ctx, name)
		case "release":
			err = s.ReleaseSavepoint(ctx, name) // releasing a savepoint releases those made after it
		case "rollback_to":
			err = s.RollbackToSavepoint(ctx, name) // it stays; later ones are gone
		}
		if errors.Is(err, session.ErrNoSavepoint) {
			// The session refused before PostgreSQL, which would abort the whole transaction over
			// an unknown savepoint.
			return nil, &Error{Type: ErrInvalidArguments, SQLState: "3B001", Message: fmt.Sprintf("Savepoint %q does not exist in session %s", name, s.ID),
				Suggestion: fmt.Sprintf(`Create it first with pg_tx {"action":"savepoint","session_id":"%s","name":"%s"}. Open savepoints: %s.`, s.ID, name, words.List(s.Savepoints()))}
		}
		if err != nil {
			return nil, classify(ctx, err, cc, true)
		}
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, Status: "ok"}, nil
	}
}
