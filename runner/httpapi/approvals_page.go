package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

//go:embed templates/approvals.html templates/approvals.css
var approvalsAssets embed.FS

var (
	approvalsTmpl = template.Must(template.New("approvals.html").Funcs(template.FuncMap{"dur": roundDuration, "ago": ago}).
			ParseFS(approvalsAssets, "templates/approvals.html"))
	approvalsCSS, _ = approvalsAssets.ReadFile("templates/approvals.css")
)

// approvalsCSP allows the page's own stylesheet and forms that post to the page, and nothing
// else: no script at all, no frames, no other origin.
const approvalsCSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const (
	// signInCookie holds the random id of an approver's sign-in; the token stays with the
	// approver.
	signInCookie = "pgtools_approvals"
	// preSignInCookie holds the CSRF token of the sign-in form, before there is a sign-in.
	preSignInCookie = "pgtools_approvals_pre"
	// maxFormBytes bounds a form: a sign-in carries one token, a JWT of a few KiB at most.
	maxFormBytes = 64 << 10
	// maxArgumentsShown bounds the arguments the page prints per request.
	maxArgumentsShown = 64 << 10
)

// DefaultSignInTTL is how long an approver stays signed in to /approvals.
const DefaultSignInTTL = 8 * time.Hour

// ApprovalsPageOptions configure NewApprovalsPage. Zero fields take their defaults.
type ApprovalsPageOptions struct {
	// Log receives sign-ins, sign-outs and decisions (principal names, never a token).
	Log zerolog.Logger
	// Metrics counts failed sign-ins with the API's authentication failures (nil: none).
	Metrics *invoke.Metrics
	// SignInTTL is how long a sign-in lasts (default DefaultSignInTTL, 8 hours; a JWT's exp
	// ends it sooner).
	SignInTTL time.Duration
	// Now is the clock of sign-ins (default time.Now); requests age by the approval store's.
	Now func() time.Time
	// SignIns keeps the sign-ins (default: a MemorySignIns of the page's own). A fleet shares
	// one in its state database, so a sign-in holds on every replica and survives restarts.
	SignIns SignIns

	// failures counts refused sign-ins per client and per token tried, shared with the API's
	// bearer checks (NewHandlerWith); nil: a count of the page's own, DefaultAuthFailuresPerSecond.
	failures *attemptLimiter
}

// ApprovalsPage is the approver's page at /approvals: sign in with a token holding the approve
// scope, see the pending requests the store lets that token decide, approve or deny each. It is
// server-rendered HTML without script, under a strict Content-Security-Policy; every POST
// must come from the page itself (Origin or Sec-Fetch-Site) and carry the sign-in's CSRF token.
// Sign-ins live in its SignIns: by default this process's memory, so a restart signs everyone
// out; with a fleet's state database, every replica's page shares them. It is safe for
// concurrent use.
type ApprovalsPage struct {
	reg  *tools.Registry
	auth *auth.Authenticator
	o    ApprovalsPageOptions
	mux  *http.ServeMux

	signIns SignIns // by the sha256 of the cookie's id
}

// signIn is the approver a request of the page comes from.
type signIn struct {
	p    tools.Principal
	csrf string
	key  [32]byte // the sha256 of the cookie's id: the sign-in's key in SignIns
}

// NewApprovalsPage serves /approvals over reg's approval store, authenticating sign-ins with a
// as the HTTP API authenticates bearer tokens (API tokens and JWTs).
func NewApprovalsPage(reg *tools.Registry, a *auth.Authenticator, o ApprovalsPageOptions) *ApprovalsPage {
	if o.SignInTTL <= 0 {
		o.SignInTTL = DefaultSignInTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.failures == nil {
		o.failures = newAttemptLimiter(DefaultAuthFailuresPerSecond, nil)
	}
	if o.SignIns == nil {
		o.SignIns = NewMemorySignIns()
	}
	p := &ApprovalsPage{reg: reg, auth: a, o: o, mux: http.NewServeMux(), signIns: o.SignIns}
	p.mux.HandleFunc("GET /approvals", p.index)
	p.mux.HandleFunc("GET /approvals/{$}", p.index)
	p.mux.HandleFunc("GET /approvals/style.css", p.stylesheet)
	p.mux.HandleFunc("POST /approvals/signin", p.signIn)
	p.mux.HandleFunc("POST /approvals/signout", p.signOut)
	p.mux.HandleFunc("POST /approvals/{id}", p.decide)
	p.mux.HandleFunc("/approvals/", func(w http.ResponseWriter, r *http.Request) {
		p.render(w, http.StatusNotFound, view{Message: "There is no such page.", Error: true})
	})
	return p
}

// ServeHTTP serves /approvals and what lies under it, with the page's security headers on every
// answer.
func (p *ApprovalsPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", approvalsCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	p.mux.ServeHTTP(w, r)
}

// view is what the template renders: the sign-in form (no Principal) or the list.
type view struct {
	Principal string
	CSRF      string
	Message   string
	Error     bool
	Requests  []pageRequest
	TTL       time.Duration // how long a request waits for a decision
	SignInFor time.Duration // how long a sign-in lasts
}

// pageRequest is one pending request as the approver reads it.
type pageRequest struct {
	ID, Caller, Database, Tool, Digest string
	Age, ExpiresIn                     time.Duration
	Rules                              []string
	Tables                             []approval.TableRows
	Total                              int64
	Commands                           string
	DDL, Destructive                   bool
	Statement                          string // the SQL text, for the tools that take one
	Arguments                          string // indented JSON
}

func (p *ApprovalsPage) stylesheet(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(approvalsCSS)
}

func (p *ApprovalsPage) index(w http.ResponseWriter, r *http.Request) {
	s, v, ok := p.current(w, r)
	if !ok {
		return
	}
	if s == nil {
		p.signInForm(w, r, http.StatusOK, "", false)
		return
	}
	p.logPrincipal(r, v.Principal)
	msg, isErr, err := p.signIns.TakeFlash(r.Context(), s.key)
	if err != nil {
		p.o.Log.Warn().Str("page", "approvals").Err(err).Msg("sign-ins: reading the last decision's outcome failed")
	}
	p.list(w, s, http.StatusOK, msg, isErr)
}

// list answers the pending requests s may decide, under message.
func (p *ApprovalsPage) list(w http.ResponseWriter, s *signIn, status int, message string, isError bool) {
	store := p.reg.Approvals()
	now := store.Now()
	v := view{Principal: s.p.Name, CSRF: s.csrf, Message: message, Error: isError, TTL: store.TTL()}
	list, e := store.List(s.p.Party())
	if e != nil && message == "" {
		v.Message, v.Error = e.Message+". "+e.Suggestion, true
	}
	for _, ap := range list {
		v.Requests = append(v.Requests, requestView(ap, now))
	}
	p.render(w, status, v)
}

// signInForm answers the sign-in form with message, giving the browser a CSRF token for it
// unless it holds one.
func (p *ApprovalsPage) signInForm(w http.ResponseWriter, r *http.Request, status int, message string, isError bool) {
	csrf := ""
	if c, err := r.Cookie(preSignInCookie); err == nil && len(c.Value) == 43 {
		csrf = c.Value
	} else {
		csrf = randomID()
		http.SetCookie(w, p.cookie(r, preSignInCookie, csrf, time.Time{}))
	}
	p.render(w, status, view{CSRF: csrf, Message: message, Error: isError, SignInFor: p.o.SignInTTL})
}

func (p *ApprovalsPage) signIn(w http.ResponseWriter, r *http.Request) {
	if !p.formFromPage(w, r) {
		return
	}
	c, err := r.Cookie(preSignInCookie)
	if err != nil || !sameSecret(c.Value, r.PostForm.Get("csrf")) {
		p.signInForm(w, r, http.StatusForbidden, "This sign-in form expired or was not sent from this page. Sign in again below.", true)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" {
		p.signInForm(w, r, http.StatusBadRequest, "Paste your approver token into the field, then sign in.", true)
		return
	}
	// The API's own check of a bearer token, on a request that carries nothing else of the
	// form's: no act-as header, so the approver signs in as the token itself.
	// A client, or a token, refused too often in the last second is not checked at all.
	keys := authKeys(r, token)
	if wait, over := p.o.failures.blocked(keys...); over {
		w.Header().Set("Retry-After", invoke.RetryAfterSeconds(wait))
		p.o.Log.Info().Str("page", "approvals").Msg("approver sign-in refused: too many failed sign-ins")
		e := rateLimitedError("failed sign-ins", p.o.failures.limit, wait)
		p.signInForm(w, r, http.StatusTooManyRequests, e.Message+". "+e.Suggestion, true)
		return
	}
	ar, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, "/approvals", nil)
	ar.Header.Set("Authorization", "Bearer "+token)
	pr, terr := p.auth.Authenticate(ar)
	if terr != nil {
		p.o.failures.add(keys...)
		p.o.Metrics.AuthFailed(false)
		p.o.Log.Info().Str("page", "approvals").Msg("approver sign-in refused: token not accepted")
		p.signInForm(w, r, http.StatusUnauthorized, "This runner does not accept that token. Paste an approver token configured on the runner.", true)
		return
	}
	if p.auth.Open() {
		// Without tokens every local caller is the same principal: nobody could tell an
		// approver from the caller whose call waits.
		p.signInForm(w, r, http.StatusForbidden, "This runner has no tokens configured, so nobody can sign in as an approver. "+
			"Configure tokens, one of them with the approve scope for each approver.", true)
		return
	}
	if !pr.Can("approve") {
		p.o.Log.Info().Str("page", "approvals").Str("principal", pr.Name).Msg("approver sign-in refused: no approve scope")
		p.signInForm(w, r, http.StatusForbidden, fmt.Sprintf("The token of %s cannot decide approval requests: it lacks the approve scope. "+
			"Sign in with an approver's token (scope approve); a caller's token never approves its own calls.", pr.Name), true)
		return
	}
	now := p.o.Now()
	expires := now.Add(p.o.SignInTTL)
	if exp, ok := jwtExpiry(token); ok && exp.Before(expires) {
		expires = exp
	}
	id := randomID()
	if err := p.signIns.Put(r.Context(), sha256.Sum256([]byte(id)), SignIn{Principal: pr, CSRF: randomID(), Expires: expires, Auth: p.auth.Fingerprint()}, now); err != nil {
		p.o.Log.Warn().Str("page", "approvals").Err(err).Msg("sign-ins: storing a sign-in failed")
		p.signInForm(w, r, http.StatusServiceUnavailable, signInsDown, true)
		return
	}
	p.logPrincipal(r, pr.Name)
	p.o.Log.Info().Str("page", "approvals").Str("principal", pr.Name).Time("until", expires).Msg("approver signed in")
	http.SetCookie(w, p.cookie(r, signInCookie, id, expires))
	http.SetCookie(w, p.cookie(r, preSignInCookie, "", time.Unix(1, 0)))
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
}

func (p *ApprovalsPage) signOut(w http.ResponseWriter, r *http.Request) {
	if !p.formFromPage(w, r) {
		return
	}
	s, _, ok := p.current(w, r)
	if !ok {
		return
	}
	if s == nil || !sameSecret(s.csrf, r.PostForm.Get("csrf")) {
		p.signInForm(w, r, http.StatusForbidden, "That sign-out was not sent from this page, or the sign-in had already ended.", true)
		return
	}
	if err := p.signIns.Delete(r.Context(), s.key); err != nil {
		p.o.Log.Warn().Str("page", "approvals").Err(err).Msg("sign-ins: ending a sign-in failed")
		p.signInForm(w, r, http.StatusServiceUnavailable, signInsDown, true)
		return
	}
	p.o.Log.Info().Str("page", "approvals").Str("principal", s.p.Name).Msg("approver signed out")
	http.SetCookie(w, p.cookie(r, signInCookie, "", time.Unix(1, 0)))
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
}

func (p *ApprovalsPage) decide(w http.ResponseWriter, r *http.Request) {
	if !p.formFromPage(w, r) {
		return
	}
	s, _, ok := p.current(w, r)
	if !ok {
		return
	}
	if s == nil {
		p.signInForm(w, r, http.StatusUnauthorized, "Your sign-in ended (after its time, a sign-out or a restart of the runner): nothing was decided. Sign in again.", true)
		return
	}
	p.logPrincipal(r, s.p.Name)
	if !sameSecret(s.csrf, r.PostForm.Get("csrf")) {
		p.list(w, s, http.StatusForbidden, "That decision was not sent from this page: nothing was decided. Decide from the list below.", true)
		return
	}
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
		approve = false
	default:
		p.list(w, s, http.StatusBadRequest, "A decision is approve or deny: nothing was decided.", true)
		return
	}
	id := r.PathValue("id")
	ap, terr := p.reg.Approvals().Decide(s.p.Party(), id, approve)
	var msg string
	switch {
	case terr != nil:
		msg = terr.Message
	case approve:
		msg = fmt.Sprintf("Approved %s: %s on %s by %s. The caller may now run it once.", ap.ID, ap.Tool, ap.Database, ap.Principal)
	default:
		msg = fmt.Sprintf("Denied %s: %s on %s by %s. It will not run.", ap.ID, ap.Tool, ap.Database, ap.Principal)
	}
	if terr == nil {
		p.o.Log.Info().Str("page", "approvals").Str("principal", s.p.Name).Str("approval_id", ap.ID).Str("status", string(ap.Status)).Msg("approval decided")
	}
	if err := p.signIns.SetFlash(r.Context(), s.key, msg, terr != nil); err != nil {
		p.o.Log.Warn().Str("page", "approvals").Err(err).Msg("sign-ins: keeping the decision's outcome failed")
	}
	http.Redirect(w, r, "/approvals", http.StatusSeeOther)
}

// formFromPage refuses a POST that a browser says comes from another site, or whose form
// cannot be read, answering it; the caller then checks the form's CSRF token.
func (p *ApprovalsPage) formFromPage(w http.ResponseWriter, r *http.Request) bool {
	if !fromSameOrigin(r) {
		p.render(w, http.StatusForbidden, view{Error: true,
			Message: "This form was sent from another site, or by a client that does not say where from; nothing was done. Open /approvals on this runner and use its forms."})
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		status := http.StatusBadRequest
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			status = http.StatusRequestEntityTooLarge
		}
		p.render(w, status, view{Error: true, Message: "The form could not be read; nothing was done. Reload /approvals and try again."})
		return false
	}
	// A field named twice (decision=deny&decision=approve) reads as either value depending on
	// the reader; the page's own forms never repeat one.
	for k, v := range r.PostForm {
		if len(v) > 1 {
			p.render(w, http.StatusBadRequest, view{Error: true, Message: fmt.Sprintf("The form names the field %q more than once; nothing was done. Reload /approvals and use its forms.", k)})
			return false
		}
	}
	return true
}

// fromSameOrigin reports whether a POST comes from a page of this runner. Sec-Fetch-Site, which
// no page can set, decides when the browser sends it: same-origin only. Without it, Origin must
// name this host. A request with neither is refused: every browser that can show the page
// sends one of them, and other clients decide approvals through the JSON API. (Origin alone is
// not enough: under the page's Referrer-Policy no-referrer, Chrome sends "Origin: null" with
// the page's own forms.)
func fromSameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

// signInsDown answers a page whose sign-ins cannot be read now (the fleet's state database).
const signInsDown = "The runner cannot reach the store of sign-ins (the fleet's state database) right now: nothing was done. Try again in a moment."

// current returns r's sign-in, if it has a live one, and the view of a signed-in page. ok false
// means the sign-ins could not be read: current has answered r.
func (p *ApprovalsPage) current(w http.ResponseWriter, r *http.Request) (s *signIn, v view, ok bool) {
	c, err := r.Cookie(signInCookie)
	if err != nil || c.Value == "" {
		return nil, view{}, true
	}
	key := sha256.Sum256([]byte(c.Value))
	in, found, err := p.signIns.Get(r.Context(), key, p.o.Now())
	if err != nil {
		p.o.Log.Warn().Str("page", "approvals").Err(err).Msg("sign-ins: reading a sign-in failed")
		p.render(w, http.StatusServiceUnavailable, view{Message: signInsDown, Error: true})
		return nil, view{}, false
	}
	if !found {
		return nil, view{}, true
	}
	if in.Auth != p.auth.Fingerprint() {
		// Signed in under other credentials (a reload changed the tokens since): signed out.
		_ = p.signIns.Delete(r.Context(), key)
		return nil, view{}, true
	}
	s = &signIn{p: in.Principal, csrf: in.CSRF, key: key}
	return s, view{Principal: s.p.Name, CSRF: s.csrf}, true
}

// cookie is one of the page's cookies: HttpOnly, SameSite=Strict, for /approvals only, Secure
// when the browser reached the runner over TLS (directly or through a proxy that says so).
// A zero expires makes a cookie that ends with the browser session.
func (p *ApprovalsPage) cookie(r *http.Request, name, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/approvals", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")}
	if !expires.IsZero() {
		c.Expires = expires.UTC()
		if d := expires.Sub(p.o.Now()).Round(time.Second); d > 0 {
			c.MaxAge = int(d / time.Second)
		} else {
			c.MaxAge = -1
		}
	}
	return c
}

func (p *ApprovalsPage) logPrincipal(r *http.Request, name string) {
	if info := httpx.RequestLogOf(r.Context()); info != nil {
		info.Principal = name
	}
}

func (p *ApprovalsPage) render(w http.ResponseWriter, status int, v view) {
	var buf bytes.Buffer
	if err := approvalsTmpl.Execute(&buf, v); err != nil {
		p.o.Log.Error().Err(err).Str("page", "approvals").Msg("rendering the approvals page failed")
		http.Error(w, "The approvals page could not be shown; the runner's log says why.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// requestView is ap as the page shows it at now.
func requestView(ap approval.Request, now time.Time) pageRequest {
	v := pageRequest{ID: ap.ID, Caller: ap.Principal, Database: ap.Database, Tool: ap.Tool, Digest: ap.Digest,
		Age: now.Sub(ap.Created), ExpiresIn: ap.Expires.Sub(now), Rules: ap.Rules, Tables: ap.Effect.Tables,
		Total: ap.Effect.Total, Commands: strings.Join(ap.Effect.Commands, ", "), DDL: ap.Effect.DDL, Destructive: ap.Effect.Destructive}
	var args map[string]any
	if json.Unmarshal(ap.Arguments, &args) == nil {
		if sql, ok := args["sql"].(string); ok {
			v.Statement = sql
		}
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, ap.Arguments, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(ap.Arguments)
	}
	if pretty.Len() > maxArgumentsShown {
		more := pretty.Len() - maxArgumentsShown
		pretty.Truncate(maxArgumentsShown)
		fmt.Fprintf(&pretty, "\n… %d more bytes (the request's digest covers them all)", more)
	}
	v.Arguments = pretty.String()
	return v
}

// roundDuration prints d to the second, or to the minute past an hour, without zero parts:
// "45s", "2m30s", "1h5m", "8h".
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	if d >= time.Hour {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// ago is how long ago something happened d ago: "just now", "2m30s ago".
func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return roundDuration(d) + " ago"
}

// jwtExpiry reads the exp claim of token when it is a JWT. It is called only after the
// Authenticator verified the token, so the claim is the issuer's.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	f, err := claims.Exp.Float64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// randomID is 32 random bytes, base64url without padding (43 characters).
func randomID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sameSecret compares two secrets in constant time; an empty one never matches.
func sameSecret(want, got string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
