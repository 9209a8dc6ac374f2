package n8n

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools"
)

// writeTimeout bounds one write to the broker; a broker that stops reading ends the connection.
const writeTimeout = 10 * time.Second

// conn is one WebSocket connection to the broker and the tasks accepted on it. A task lives and
// dies with its connection: once the connection is gone the broker has already failed the task
// towards n8n, so nobody would read its answer.
//
// Goroutines: serve's own runs the connection's lifecycle; a reader dispatches the broker's
// messages in order; a writer is the only one to write messages and pings, since gorilla allows
// one concurrent writer (every message goes through out); and one runs each task.
type conn struct {
	c   *Client
	ws  *websocket.Conn
	log zerolog.Logger

	out    chan []byte   // messages for the writer; nil asks it to send a close frame and stop
	gone   chan struct{} // closed when the connection has failed or been closed
	goneMu sync.Once
	err    error // why the connection ended; set before gone is closed

	taskCtx     context.Context // parent of every task's context
	cancelTasks context.CancelFunc

	mu         sync.Mutex
	registered bool                // broker:runnerregistered arrived: offers may be sent
	draining   bool                // broker:drain arrived or Run's context ended: no new tasks
	closing    bool                // the connection is ending: no task may start
	offers     map[string]struct{} // offers the broker holds
	tasks      map[string]*task    // accepted tasks, waiting for settings or running
	running    int                 // task goroutines alive
	idle       chan struct{}       // signalled (non-blocking) whenever a task goroutine ends
}

// task is one accepted task.
type task struct {
	running   bool               // settings arrived and the call started
	cancel    context.CancelFunc // cancels the running call
	cancelled bool               // the broker cancelled it: it wants no answer
	timer     *time.Timer        // frees the slot if settings never come
}

// serve runs one connection until the broker closes it, it fails, or ctx ends (then it shuts
// down gracefully). registered reports whether the broker registered the runner.
func (c *Client) serve(ctx context.Context, ws *websocket.Conn) (registered bool, err error) {
	k := &conn{c: c, ws: ws, log: c.log,
		out: make(chan []byte, 4*c.opts.Concurrency+8), gone: make(chan struct{}),
		offers: map[string]struct{}{}, tasks: map[string]*task{}, idle: make(chan struct{}, 1)}
	k.taskCtx, k.cancelTasks = context.WithCancel(context.WithoutCancel(ctx))
	defer k.cancelTasks()
	ws.SetReadLimit(c.opts.MaxMessageBytes)
	deadline := 3 * c.opts.PingInterval
	_ = ws.SetReadDeadline(time.Now().Add(deadline))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(deadline)) })
	ping := ws.PingHandler()
	ws.SetPingHandler(func(data string) error {
		_ = ws.SetReadDeadline(time.Now().Add(deadline))
		return ping(data)
	})

	writerDone := make(chan struct{})
	go func() { defer close(writerDone); k.writeLoop() }()
	readerDone := make(chan struct{})
	go func() { defer close(readerDone); k.readLoop(deadline) }()

	select {
	case <-k.gone:
		// The broker went away (or broke the protocol): nobody will read the tasks' answers.
		if n := k.stop(); n > 0 {
			k.log.Warn().Int("tasks", n).Msg("n8n broker connection lost; cancelling the tasks in flight")
		}
		k.cancelTasks()
		k.waitTasks(nil, nil)
	case <-ctx.Done():
		k.shutdown()
	}
	_ = ws.Close()
	<-writerDone
	<-readerDone
	k.mu.Lock()
	registered = k.registered
	k.mu.Unlock()
	return registered, k.err
}

// shutdown ends the connection for Run's context: no new tasks, the running ones get
// Options.Grace to finish and deliver their answers, then they are cancelled; finally a close
// frame tells the broker the runner is leaving.
func (k *conn) shutdown() {
	k.mu.Lock()
	k.draining = true
	n := k.running
	k.mu.Unlock()
	if n > 0 {
		k.log.Info().Int("tasks", n).Dur("grace", k.c.opts.Grace).Msg("shutting down: waiting for the n8n tasks in flight")
	}
	grace := time.NewTimer(k.c.opts.Grace)
	defer grace.Stop()
	// A broker that goes away meanwhile would not read the answers: stop waiting then.
	if !k.waitTasks(grace.C, k.gone) {
		k.log.Warn().Dur("grace", k.c.opts.Grace).Msg("n8n tasks did not finish in time; cancelling them")
		k.cancelTasks()
	}
	// Settings that arrived meanwhile may have started a task: stop starting any, then wait
	// (a cancelled call returns promptly: the statement is cancelled on the server).
	k.stop()
	k.cancelTasks()
	k.waitTasks(nil, nil)
	select {
	case k.out <- nil:
		// The writer flushes the answers queued before the close frame.
		select {
		case <-k.gone:
		case <-time.After(writeTimeout):
		}
	case <-k.gone:
	}
}

// stop forbids new tasks and returns how many are running.
func (k *conn) stop() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closing, k.draining = true, true
	for _, t := range k.tasks {
		if t.timer != nil {
			t.timer.Stop()
		}
	}
	return k.running
}

// waitTasks waits until no task goroutine runs, or until timeout fires or abort is closed (nil:
// never). It reports whether none runs.
func (k *conn) waitTasks(timeout <-chan time.Time, abort <-chan struct{}) bool {
	for {
		k.mu.Lock()
		n := k.running
		k.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-k.idle:
		case <-timeout:
			return false
		case <-abort:
			return false
		}
	}
}

// fail records why the connection ended and wakes serve.
func (k *conn) fail(err error) {
	k.goneMu.Do(func() {
		k.err = err
		close(k.gone)
	})
}

// send queues a message for the writer. It gives up when the connection is gone.
func (k *conn) send(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		k.log.Error().Err(err).Msg("encoding a message for the n8n broker")
		return
	}
	select {
	case k.out <- b:
	case <-k.gone:
	}
}

// writeLoop is the only goroutine that writes to the socket: queued messages and pings.
func (k *conn) writeLoop() {
	ticker := time.NewTicker(k.c.opts.PingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-k.gone:
			return
		case b := <-k.out:
			_ = k.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			if b == nil {
				_ = k.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "pgtools is shutting down"))
				k.fail(nil)
				return
			}
			if err := k.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				k.fail(fmt.Errorf("writing to the broker: %w", err))
				return
			}
		case <-ticker.C:
			if err := k.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				k.fail(fmt.Errorf("pinging the broker: %w", err))
				return
			}
		}
	}
}

// readLoop reads and dispatches the broker's messages in order until the connection ends.
func (k *conn) readLoop(deadline time.Duration) {
	for {
		typ, data, err := k.ws.ReadMessage()
		if err != nil {
			k.fail(readError(err))
			return
		}
		_ = k.ws.SetReadDeadline(time.Now().Add(deadline))
		if typ != websocket.TextMessage {
			continue
		}
		var m brokerMessage
		if err := json.Unmarshal(data, &m); err != nil {
			k.log.Debug().Int("bytes", len(data)).Msg("ignoring a message from the n8n broker that is not a JSON object")
			continue
		}
		k.handle(m)
	}
}

// readError describes why reading ended.
func readError(err error) error {
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("the broker closed the connection (code %d %s)", ce.Code, ce.Text)
	case errors.Is(err, websocket.ErrReadLimit):
		return errors.New("the broker sent a message larger than the runner's message limit")
	}
	return fmt.Errorf("reading from the broker: %w", err)
}

// handle acts on one broker message. It runs on the reader goroutine, so messages are handled in
// the order they came.
func (k *conn) handle(m brokerMessage) {
	switch m.Type {
	case msgInfoRequest:
		k.send(runnerInfo{Type: "runner:info", Name: k.c.opts.Name, Types: []string{TaskType}})
	case msgRunnerRegistered:
		k.mu.Lock()
		k.registered = true
		k.mu.Unlock()
		k.log.Info().Msg("registered with the n8n task broker")
		k.offer()
	case msgTaskOfferAccept:
		k.accept(m.TaskID, m.OfferID)
	case msgTaskSettings:
		k.start(m.TaskID, m.Settings)
	case msgTaskCancel:
		k.cancel(m.TaskID)
	case msgDrain:
		k.mu.Lock()
		k.draining = true
		n := k.running
		k.mu.Unlock()
		k.log.Info().Int("tasks", n).Msg("the n8n broker is draining: no new tasks; finishing those in flight")
	default:
		k.log.Debug().Str("type", m.Type).Msg("ignoring an n8n broker message")
	}
}

// offer tops the outstanding offers up to the free slots. Offers never expire, so they stay
// valid until the broker accepts them or the connection ends.
func (k *conn) offer() {
	k.mu.Lock()
	if !k.registered || k.draining {
		k.mu.Unlock()
		return
	}
	var ids []string
	for n := k.c.opts.Concurrency - len(k.tasks) - len(k.offers); n > 0; n-- {
		id := newID()
		k.offers[id] = struct{}{}
		ids = append(ids, id)
	}
	k.mu.Unlock()
	for _, id := range ids {
		k.send(taskOffer{Type: "runner:taskoffer", OfferID: id, TaskType: TaskType, ValidFor: -1})
	}
}

// accept answers broker:taskofferaccept within the broker's accept window (2 s in n8n).
func (k *conn) accept(taskID, offerID string) {
	k.mu.Lock()
	_, known := k.offers[offerID]
	delete(k.offers, offerID)
	reason := ""
	switch {
	case taskID == "":
		k.mu.Unlock()
		return
	case k.draining:
		reason = "pgtools runner is draining or shutting down"
	case !known:
		reason = "unknown offer"
	case len(k.tasks) >= k.c.opts.Concurrency:
		reason = "pgtools runner is at its concurrency limit"
	case k.tasks[taskID] != nil:
		reason = "task already accepted"
	}
	if reason == "" {
		t := &task{}
		t.timer = time.AfterFunc(k.c.opts.SettingsTimeout, func() { k.settingsTimedOut(taskID) })
		k.tasks[taskID] = t
	}
	k.mu.Unlock()
	if reason != "" {
		k.send(taskAnswer{Type: "runner:taskrejected", TaskID: taskID, Reason: reason})
		return
	}
	k.send(taskAnswer{Type: "runner:taskaccepted", TaskID: taskID})
}

// start runs an accepted task once its settings arrive.
func (k *conn) start(taskID string, settings json.RawMessage) {
	k.mu.Lock()
	t := k.tasks[taskID]
	if t == nil || t.running {
		k.mu.Unlock()
		k.log.Debug().Str("task_id", taskID).Msg("ignoring settings for a task this runner does not hold")
		return
	}
	if k.closing {
		delete(k.tasks, taskID)
		k.mu.Unlock()
		k.answerError(taskID, &tools.Error{Type: tools.ErrConnection, Message: "The pgtools runner is shutting down",
			Suggestion: "Retry the call in a moment."})
		return
	}
	t.timer.Stop()
	timeout := time.Duration(k.c.taskTimeout.Load())
	ctx, cancel := context.WithTimeoutCause(k.taskCtx, taskBudget(timeout), errTaskTimeout)
	t.running, t.cancel = true, cancel
	k.running++
	k.mu.Unlock()
	go func() {
		defer k.taskEnded()
		defer cancel()
		body, ok := k.c.call(ctx, taskID, settings, timeout)
		k.mu.Lock()
		cancelled := t.cancelled
		delete(k.tasks, taskID)
		k.mu.Unlock()
		switch {
		case cancelled:
			// The broker already told n8n; an answer would be dropped.
		case ok:
			k.send(taskDone{Type: "runner:taskdone", TaskID: taskID, Data: taskResult{Result: body}})
		default:
			k.send(taskError{Type: "runner:taskerror", TaskID: taskID, Error: body})
		}
		k.offer()
	}()
}

func (k *conn) taskEnded() {
	k.mu.Lock()
	k.running--
	k.mu.Unlock()
	select {
	case k.idle <- struct{}{}:
	default:
	}
}

// cancel handles broker:taskcancel: the requester gave up, the task timed out in n8n, or n8n
// is shutting down. A running call's context is cancelled, which cancels its statement on the
// server.
func (k *conn) cancel(taskID string) {
	k.mu.Lock()
	t := k.tasks[taskID]
	if t != nil && t.running {
		t.cancelled = true
		t.cancel()
		k.mu.Unlock()
		k.log.Info().Str("task_id", taskID).Msg("n8n cancelled a running task")
		return
	}
	// A task still waiting for its settings, or one this runner never accepted: n8n sends
	// that when the runner missed the accept window, and then it also drops every offer it holds
	// from this runner. Offers cannot be withdrawn, so start over: forget them and offer afresh.
	// Should the broker in fact still hold some, they are rejected as unknown when it picks
	// them, and it moves on to the next offer.
	if t != nil {
		t.timer.Stop()
		delete(k.tasks, taskID)
	}
	clear(k.offers)
	k.mu.Unlock()
	k.offer()
}

// settingsTimedOut frees the slot of a task whose settings never came.
func (k *conn) settingsTimedOut(taskID string) {
	k.mu.Lock()
	t := k.tasks[taskID]
	if t == nil || t.running || k.closing {
		k.mu.Unlock()
		return
	}
	delete(k.tasks, taskID)
	k.mu.Unlock()
	k.log.Warn().Str("task_id", taskID).Dur("waited", k.c.opts.SettingsTimeout).Msg("an accepted n8n task got no settings; freeing its slot")
	k.answerError(taskID, &tools.Error{Type: tools.ErrInternal, Message: "The task's settings never reached the pgtools runner",
		Suggestion: "Retry the call."})
	k.offer()
}

func (k *conn) answerError(taskID string, e *tools.Error) {
	body, _ := e.MarshalJSON()
	k.send(taskError{Type: "runner:taskerror", TaskID: taskID, Error: body})
}

// newID returns a random offer id.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
