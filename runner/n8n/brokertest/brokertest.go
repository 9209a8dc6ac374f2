// Package brokertest is a stand-in for n8n's task broker, for tests of external task runners.
//
// It serves what a runner talks to, on 127.0.0.1, the way n8n 2.41.1 does: POST /runners/auth
// exchanges the auth token for a single-use grant token ({"data":{"token":…}}; a wrong token
// gets 403), and GET /runners/_ws?id=<runner id> upgrades to a WebSocket when the
// Authorization header carries an unused grant (else 403). On a new connection it sends
// broker:inforequest, waits for runner:info and answers broker:runnerregistered; from then on
// the test drives the protocol through the Runner: it reads what the runner sent and sends
// broker messages itself. It does not match offers to requests on its own.
//
// Everything is safe for concurrent use. Waits are bounded: a helper that times out fails the
// test.
package brokertest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Broker is a running stand-in. Its URL is what a runner is configured with.
type Broker struct {
	// URL is the broker's base URL, http://127.0.0.1:<port>.
	URL string

	authToken string
	srv       *httptest.Server
	upgrader  websocket.Upgrader
	runners   chan *Runner

	mu           sync.Mutex
	all          []*Runner
	grants       map[string]bool // issued and not yet used
	issued       []string
	authRejected []time.Time
}

// New starts a stand-in that accepts authToken, and stops it when the test ends.
func New(t testing.TB, authToken string) *Broker {
	t.Helper()
	b := &Broker{authToken: authToken, grants: map[string]bool{}, runners: make(chan *Runner, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /runners/auth", b.auth)
	mux.HandleFunc("GET /runners/_ws", b.upgrade)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	b.srv = httptest.NewServer(mux) // listens on 127.0.0.1
	b.URL = b.srv.URL
	t.Cleanup(b.Close)
	return b
}

// Close stops the server and drops every connection.
func (b *Broker) Close() {
	b.mu.Lock()
	all := b.all
	b.mu.Unlock()
	for _, rn := range all {
		rn.Drop()
	}
	b.srv.CloseClientConnections()
	b.srv.Close()
}

func (b *Broker) auth(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Token == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":400,"message":"invalid_type"}`))
		return
	}
	if body.Token != b.authToken {
		b.mu.Lock()
		b.authRejected = append(b.authRejected, time.Now())
		b.mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"code":403,"message":"Forbidden"}`))
		return
	}
	grant := randomHex(32)
	b.mu.Lock()
	b.grants[grant] = true
	b.issued = append(b.issued, grant)
	b.mu.Unlock()
	out, _ := json.Marshal(map[string]any{"data": map[string]string{"token": grant}})
	_, _ = w.Write(out)
}

func (b *Broker) upgrade(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		http.Error(w, "", http.StatusBadRequest)
		return
	}
	grant, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, "", http.StatusUnauthorized)
		return
	}
	b.mu.Lock()
	valid := b.grants[grant]
	delete(b.grants, grant) // single use
	b.mu.Unlock()
	if !valid {
		http.Error(w, "", http.StatusForbidden)
		return
	}
	ws, err := b.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	rn := &Runner{ID: id, Grant: grant, ws: ws, notify: make(chan struct{}, 1), closed: make(chan struct{}), pongs: make(chan struct{}, 8)}
	ws.SetPongHandler(func(string) error {
		select {
		case rn.pongs <- struct{}{}:
		default:
		}
		return nil
	})
	b.mu.Lock()
	b.all = append(b.all, rn)
	b.mu.Unlock()
	go rn.readLoop()
	go func() {
		rn.Send(nil, map[string]string{"type": "broker:inforequest"})
		info, ok := rn.wait(5*time.Second, func(m Message) bool { return m.Type == "runner:info" })
		if !ok {
			_ = ws.Close()
			return
		}
		rn.Info = info
		rn.Send(nil, map[string]string{"type": "broker:runnerregistered"})
		b.runners <- rn
	}()
}

// NextRunner waits for the next runner that completes the handshake (runner:info answered with
// broker:runnerregistered).
func (b *Broker) NextRunner(t testing.TB, timeout time.Duration) *Runner {
	t.Helper()
	select {
	case rn := <-b.runners:
		return rn
	case <-time.After(timeout):
		t.Fatalf("brokertest: no runner registered within %v", timeout)
		return nil
	}
}

// Grants returns every grant token issued so far, oldest first.
func (b *Broker) Grants() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.issued...)
}

// AuthRejections returns when each grant-token request with a wrong auth token came.
func (b *Broker) AuthRejections() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.authRejected...)
}

// Message is one message a runner sent, with the fields of every runner message type.
type Message struct {
	Type     string          `json:"type"`
	Name     string          `json:"name"`
	Types    []string        `json:"types"`
	OfferID  string          `json:"offerId"`
	TaskType string          `json:"taskType"`
	ValidFor int             `json:"validFor"`
	TaskID   string          `json:"taskId"`
	Reason   string          `json:"reason"`
	Data     json.RawMessage `json:"data"`
	Error    json.RawMessage `json:"error"`
	// Raw is the message as sent.
	Raw json.RawMessage `json:"-"`
}

// Result returns data.result of a runner:taskdone.
func (m Message) Result() json.RawMessage {
	var d struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.Unmarshal(m.Data, &d)
	return d.Result
}

// Runner is one registered runner connection.
type Runner struct {
	// ID is the runner id from the URL's query; Grant is the grant token it connected with.
	ID, Grant string
	// Info is its runner:info.
	Info Message

	ws      *websocket.Conn
	writeMu sync.Mutex
	notify  chan struct{}
	closed  chan struct{}
	pongs   chan struct{}

	mu       sync.Mutex
	msgs     []Message
	consumed []bool
	taken    map[string]bool // offers the test has used
}

func (r *Runner) readLoop() {
	defer close(r.closed)
	for {
		_, data, err := r.ws.ReadMessage()
		if err != nil {
			return
		}
		var m Message
		if json.Unmarshal(data, &m) != nil {
			m = Message{Type: "(not JSON)"}
		}
		m.Raw = append(json.RawMessage(nil), data...)
		r.mu.Lock()
		r.msgs = append(r.msgs, m)
		r.consumed = append(r.consumed, false)
		r.mu.Unlock()
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
}

// Send sends v as a JSON text frame. t may be nil (then errors are ignored).
func (r *Runner) Send(t testing.TB, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		if t != nil {
			t.Fatalf("brokertest: encoding: %v", err)
		}
		return
	}
	r.SendRaw(t, b)
}

// SendRaw sends data as one text frame.
func (r *Runner) SendRaw(t testing.TB, data []byte) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	_ = r.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := r.ws.WriteMessage(websocket.TextMessage, data); err != nil && t != nil {
		t.Errorf("brokertest: sending to the runner: %v", err)
	}
}

// Ping sends a WebSocket ping and reports whether the pong came within timeout.
func (r *Runner) Ping(timeout time.Duration) bool {
	if err := r.ws.WriteControl(websocket.PingMessage, []byte("hb"), time.Now().Add(timeout)); err != nil {
		return false
	}
	select {
	case <-r.pongs:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Drop cuts the connection without a close frame, as a crashed or restarted n8n does.
func (r *Runner) Drop() { _ = r.ws.NetConn().Close() }

// Closed is closed once the connection has ended (the runner closed it, or Drop).
func (r *Runner) Closed() <-chan struct{} { return r.closed }

// Wait returns the first message not yet returned by Wait that matches pred, waiting up to
// timeout for it; it fails the test on timeout.
func (r *Runner) Wait(t testing.TB, timeout time.Duration, what string, pred func(Message) bool) Message {
	t.Helper()
	m, ok := r.wait(timeout, pred)
	if !ok {
		t.Fatalf("brokertest: no %s from the runner within %v; it sent:\n%s", what, timeout, r.dump())
	}
	return m
}

// take marks the first unconsumed message matching pred consumed and returns it.
func (r *Runner) take(pred func(Message) bool) (Message, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, m := range r.msgs {
		if !r.consumed[i] && pred(m) {
			r.consumed[i] = true
			return m, true
		}
	}
	return Message{}, false
}

func (r *Runner) wait(timeout time.Duration, pred func(Message) bool) (Message, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if m, ok := r.take(pred); ok {
			return m, true
		}
		select {
		case <-r.notify:
		case <-r.closed:
			// Look once more: the last messages may have come just before the close.
			return r.take(pred)
		case <-deadline.C:
			return Message{}, false
		}
	}
}

// Count returns how many messages the runner has sent that match pred.
func (r *Runner) Count(pred func(Message) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if pred(m) {
			n++
		}
	}
	return n
}

// Messages returns every message the runner has sent so far.
func (r *Runner) Messages() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Message(nil), r.msgs...)
}

// OpenOffers returns the ids of the offers the runner made that the test has not accepted.
func (r *Runner) OpenOffers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, m := range r.msgs {
		if m.Type == "runner:taskoffer" && !r.taken[m.OfferID] {
			ids = append(ids, m.OfferID)
		}
	}
	return ids
}

// IsType matches messages of type typ, for Wait and Count.
func IsType(typ string) func(Message) bool {
	return func(m Message) bool { return m.Type == typ }
}

// ForTask matches messages of type typ about task taskID.
func ForTask(typ, taskID string) func(Message) bool {
	return func(m Message) bool { return m.Type == typ && m.TaskID == taskID }
}

// Accept sends broker:taskofferaccept for one of the runner's open offers (waiting up to 5 s for
// one) and returns the new task's id. It does not wait for the answer.
func (r *Runner) Accept(t testing.TB) string {
	t.Helper()
	var offer string
	for deadline := time.Now().Add(5 * time.Second); offer == ""; {
		if ids := r.OpenOffers(); len(ids) > 0 {
			offer = ids[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brokertest: the runner has no open offer; it sent:\n%s", r.dump())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.mu.Lock()
	if r.taken == nil {
		r.taken = map[string]bool{}
	}
	r.taken[offer] = true
	r.mu.Unlock()
	taskID := randomHex(4)
	r.Send(t, map[string]string{"type": "broker:taskofferaccept", "taskId": taskID, "offerId": offer})
	return taskID
}

// StartTask does what n8n does for one startJob: accepts an open offer, waits for
// runner:taskaccepted and sends broker:tasksettings with settings. It returns the task id.
func (r *Runner) StartTask(t testing.TB, settings any) string {
	t.Helper()
	taskID := r.Accept(t)
	r.Wait(t, 2*time.Second, "runner:taskaccepted", ForTask("runner:taskaccepted", taskID))
	r.Send(t, map[string]any{"type": "broker:tasksettings", "taskId": taskID, "settings": settings})
	return taskID
}

// Answer waits for the runner:taskdone or runner:taskerror of a task.
func (r *Runner) Answer(t testing.TB, taskID string, timeout time.Duration) Message {
	t.Helper()
	return r.Wait(t, timeout, "answer to task "+taskID, func(m Message) bool {
		return (m.Type == "runner:taskdone" || m.Type == "runner:taskerror") && m.TaskID == taskID
	})
}

func (r *Runner) dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.msgs {
		raw := string(m.Raw)
		if len(raw) > 300 {
			raw = raw[:300] + "…"
		}
		b.WriteString("  " + raw + "\n")
	}
	return b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
