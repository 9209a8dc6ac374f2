package mcpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
)

// JSON-RPC ids go back exactly as they were sent. The go-sdk decodes an id into a float64 and
// keeps its integer part, so 1.5 came back as 1, 1e2 as 100 and a big integer rounded; a string
// with escapes comes back re-escaped. A client matches answers to requests by id, so an id that
// changes on the way is an answer the client cannot place (or places on the wrong request).
//
// Rather than teach the SDK new ids, a message whose id the SDK would not echo byte for byte
// reaches it with a stand-in string id, random per request, and the answer's envelope gets the
// original bytes back. Ids the SDK does echo exactly (the common ones: small integers and plain
// strings) pass untouched, at no cost.

// exactID matches the ids the SDK writes back as sent: integers the float64 holds exactly in their
// canonical spelling, and strings that need no escaping.
var exactID = regexp.MustCompile(`^(-?[1-9][0-9]{0,14}|0|"[A-Za-z0-9_.:/+=-]{0,128}")$`)

// idSwap records the ids replaced in one POST (or one stdio line): stand-in → original bytes.
type idSwap struct {
	from [][]byte // `"jsonrpc":"2.0","id":"<stand-in>"` as the SDK writes it
	to   [][]byte // `"jsonrpc":"2.0","id":<original>`
	// standIn and original are the ids themselves, pairwise.
	standIn, original [][]byte
}

// restore is b with every stand-in of swap written back as its original.
func (swap *idSwap) restore(b []byte) []byte {
	for i, from := range swap.from {
		if bytes.Contains(b, from) {
			b = bytes.Replace(b, from, swap.to[i], 1)
		}
	}
	return b
}

// swapIDs returns body with every id the SDK would not echo exactly replaced by a stand-in, and
// the swap that restores them in the answer, or nil when there is nothing to replace (then body
// is returned as it is). A body that is not a JSON object or array of objects is left to the
// SDK, which answers it with its parse error.
func swapIDs(body []byte) ([]byte, *idSwap) {
	if id, ok := topLevelID(body); ok && (id == nil || exactID.Match(id)) {
		return body, nil
	}
	var batch []json.RawMessage
	single := true
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(body, &batch) != nil {
			return body, nil
		}
		single = false
	} else {
		batch = []json.RawMessage{body}
	}
	var swap idSwap
	var out bytes.Buffer
	if !single {
		out.WriteByte('[')
	}
	for i, msg := range batch {
		if i > 0 {
			out.WriteByte(',')
		}
		rewritten, ok := rewriteID(msg, &swap)
		if !ok {
			return body, nil
		}
		out.Write(rewritten)
	}
	if !single {
		out.WriteByte(']')
	}
	if len(swap.from) == 0 {
		return body, nil
	}
	return out.Bytes(), &swap
}

// rewriteID rewrites one message, an object: every member named id (after unescaping, as the
// SDK reads names) whose value the SDK would change gets the stand-in.
func rewriteID(msg []byte, swap *idSwap) ([]byte, bool) {
	var standIn []byte
	return rewriteMembers(msg, func(key string, val []byte) []byte {
		if key != "id" || string(val) == "null" || exactID.Match(val) || !isID(val) {
			return val
		}
		if standIn == nil {
			var r [12]byte
			_, _ = rand.Read(r[:])
			standIn = []byte(`"pgtools-id-` + hex.EncodeToString(r[:]) + `"`)
			swap.from = append(swap.from, append([]byte(`"jsonrpc":"2.0","id":`), standIn...))
			swap.to = append(swap.to, append([]byte(`"jsonrpc":"2.0","id":`), val...))
			swap.standIn, swap.original = append(swap.standIn, standIn), append(swap.original, val)
		}
		return standIn
	})
}

// rewriteMembers rewrites an object member by member, each value as fn returns it for its key
// (unescaped, as the SDK reads names), or reports false when msg is not an object.
func rewriteMembers(msg []byte, fn func(key string, val []byte) []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for n := 0; dec.More(); n++ {
		tok, err := dec.Token()
		key, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		if n > 0 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(fn(key, bytes.TrimSpace(val)))
	}
	out.WriteByte('}')
	return out.Bytes(), true
}

// topLevelID returns the raw id of a single message written in the canonical form the fast
// scanner reads (nil when it has none), or false when the body is anything else.
func topLevelID(body []byte) ([]byte, bool) {
	if !json.Valid(body) {
		return nil, true // the SDK's parse error, with a null id
	}
	var id []byte
	seen := false
	sc := fastScanner{b: body}
	ok := sc.object(func(key string) bool {
		v := sc.value()
		if key == "id" {
			id = v
			return once(&seen)
		}
		return true
	})
	return id, ok && sc.end()
}

// idRestorer writes the SDK's answer with the original ids back in its envelopes. The SDK writes
// each message (a JSON answer, an SSE event) in one Write, so a stand-in is never split.
type idRestorer struct {
	http.ResponseWriter
	swap *idSwap
}

func (w *idRestorer) WriteHeader(status int) {
	w.Header().Del("Content-Length") // the original id may be longer or shorter
	w.ResponseWriter.WriteHeader(status)
}

func (w *idRestorer) Write(b []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(w.swap.restore(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach Flush for the SSE answers.
func (w *idRestorer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far.
func (w *idRestorer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
