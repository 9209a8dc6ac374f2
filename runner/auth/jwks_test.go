package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// testRefresh is the background refresh interval of the tests that watch it run.
const testRefresh = 20 * time.Millisecond

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(testRefresh / 2)
	}
}

// settled waits until fetches stops growing over several refresh intervals and returns its
// count, failing the test when it never does.
func settled(t *testing.T, what string, fetches func() int, between func()) int {
	t.Helper()
	var n int
	eventually(t, what, func() bool {
		between()
		before := fetches()
		time.Sleep(10 * testRefresh)
		n = fetches()
		return n == before
	})
	return n
}

// rotate publishes a new RSA key of iss under kid and returns it.
func rotate(t *testing.T, iss *authtest.JWKSIssuer, kid string) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss.Publish(authtest.PublicJWK(t, &k.PublicKey, kid, jwkset.AlgRS256))
	return k
}

// TestJWKSBackgroundRefresh: the JWKS is fetched again every refresh interval, so a rotated key
// is known before any token names it, and the refresh stops when its context ends.
func TestJWKSBackgroundRefresh(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rk, err := newRemoteKeys(ctx, iss.URL(), nil, testRefresh, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rk.gate = rate.NewLimiter(rate.Every(time.Hour), 0) // no fetch on an unknown kid: only the refresh
	v := &jwtVerifier{cfg: JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Roles: []string{"agent"}}.WithDefaults(), methods: asymmetricMethods, keys: rk}
	rotated := rotate(t, iss, "rsa-2")
	token := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-2", rotated, authtest.ValidClaims("erin", "agent"))
	// The gate refuses every fetch on an unknown kid, so only a background refresh can make the
	// rotated key known. (A fetch is counted when the issuer serves it, before the key set is
	// stored: the test waits for the key itself.)
	eventually(t, "the rotated key, from a background refresh", func() bool {
		_, terr := v.verify(t.Context(), token, false)
		return terr == nil
	})
	cancel()
	settled(t, "the refresh stopping after its context ended", iss.Hits, func() {})
}

// TestJWKSRefreshEndsWithTheVerifier: a verifier built from the config (as every handler, and
// every reloaded generation, builds one) stops its background refresh once it is dropped.
func TestJWKSRefreshEndsWithTheVerifier(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL(), Roles: []string{"agent"},
		jwksRefresh: testRefresh}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "a background refresh", func() bool { return iss.Hits() > 1 })
	runtime.KeepAlive(v)
	v = nil
	settled(t, "the refresh stopping once the verifier is garbage", iss.Hits, runtime.GC)
}

// TestJWKSUnreachable: an issuer that cannot be fetched at start does not stop the start; the
// log and every refused token name jwt.jwks_url, and the keys arrive with the first fetch that
// succeeds.
func TestJWKSUnreachable(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	var down atomic.Bool
	down.Store(true)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		iss.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	logs := &pgtest.SyncBuffer{}
	v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: flaky.URL + "/jwks.json", Roles: []string{"agent"}},
		"", nil, zerolog.New(logs))
	if err != nil {
		t.Fatalf("an unreachable issuer stopped the start: %v", err)
	}
	if !strings.Contains(logs.String(), "jwt.jwks_url") || !strings.Contains(logs.String(), "503") {
		t.Errorf("the start's log does not name jwt.jwks_url and the failure:\n%s", logs)
	}
	token := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.ValidClaims("erin", "agent"))
	_, terr := v.verify(t.Context(), token, false)
	if terr == nil || !strings.Contains(terr.Message, "cannot fetch the keys") || !strings.Contains(terr.Suggestion, "jwt.jwks_url") {
		t.Fatalf("a token while the issuer is down: %v", terr)
	}
	down.Store(false)
	v.keys.(*remoteKeys).gate = rate.NewLimiter(rate.Every(jwksMinRefetch), 1) // the interval has passed
	if _, terr := v.verify(t.Context(), token, false); terr != nil {
		t.Fatalf("once the issuer is back: %v", terr)
	}
}

// TestJWKSOverTheCap: a key set larger than maxJWKSBytes is refused, whether the response
// states its length or not; at start no key is held, later the keys held before stay.
func TestJWKSOverTheCap(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	var big atomic.Bool
	pad := strings.Repeat("x", maxJWKSBytes)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		iss.Handler().ServeHTTP(rec, r)
		body := rec.Body.String()
		if big.Load() {
			// Still a valid key set, only too large.
			body = strings.TrimSuffix(strings.TrimSpace(body), "}") + `,"padding":"` + pad + `"}`
		}
		if !r.URL.Query().Has("chunked") {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	token := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.ValidClaims("erin", "agent"))
	for _, query := range []string{"", "?chunked"} {
		build := func(t *testing.T) (*jwtVerifier, *pgtest.SyncBuffer) {
			logs := &pgtest.SyncBuffer{}
			v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: srv.URL + "/jwks.json" + query,
				Roles: []string{"agent"}}, "", nil, zerolog.New(logs))
			if err != nil {
				t.Fatal(err)
			}
			return v, logs
		}
		t.Run("at start"+query, func(t *testing.T) {
			big.Store(true)
			v, logs := build(t)
			if _, terr := v.verify(t.Context(), token, false); terr == nil || !strings.Contains(terr.Message, "cannot fetch the keys") {
				t.Fatalf("a token verified against an oversized key set: %v", terr)
			}
			if !strings.Contains(logs.String(), "larger than 1024 KiB") {
				t.Errorf("the log does not say the key set is too large:\n%s", logs)
			}
		})
		t.Run("later"+query, func(t *testing.T) {
			big.Store(false)
			v, logs := build(t)
			big.Store(true)
			rotated := rotate(t, iss, "rsa-"+query)
			v.keys.(*remoteKeys).gate = rate.NewLimiter(rate.Every(jwksMinRefetch), 1) // the interval has passed
			if _, terr := v.verify(t.Context(), authtest.Sign(t, jwt.SigningMethodRS256, "rsa-"+query, rotated, authtest.ValidClaims("erin", "agent")), false); terr == nil {
				t.Fatal("a key from an oversized key set was used")
			}
			if !strings.Contains(logs.String(), "larger than 1024 KiB") {
				t.Errorf("the log does not say the key set is too large:\n%s", logs)
			}
			if _, terr := v.verify(t.Context(), token, false); terr != nil {
				t.Fatalf("the keys held before the oversized set: %v", terr)
			}
		})
	}
}

// TestCappedBody: a body of exactly the cap reads whole; one byte more fails, at any read size.
func TestCappedBody(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		size    int
		wantErr bool
	}{{0, false}, {9, false}, {10, false}, {11, true}, {1000, true}} {
		for _, chunk := range []int{1, 3, 512} {
			b := &cappedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("a", c.size))), left: 10}
			got, err := readChunks(b, chunk)
			if c.wantErr != errors.Is(err, errJWKSTooLarge) || (!c.wantErr && (err != nil || len(got) != c.size)) {
				t.Errorf("size %d chunk %d: read %d bytes, error %v", c.size, chunk, len(got), err)
			}
		}
	}
}

func readChunks(r io.Reader, chunk int) ([]byte, error) {
	var out []byte
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
