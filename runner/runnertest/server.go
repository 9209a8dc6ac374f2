package runnertest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

// ServerFixture is a Server as pgtools serve builds it (pools, registry, session manager,
// metrics, limits), behind an httptest server.
type ServerFixture struct {
	Server   *runner.Server
	HTTP     *httptest.Server
	Sessions *session.Manager
	Log      *pgtest.SyncBuffer // the runtime's log
}

// NewServerFixture builds cfg's runtime with BuildServer and serves its Handler until the test
// ends.
func NewServerFixture(t testing.TB, cfg *config.Config) *ServerFixture {
	t.Helper()
	s, sessions, logs, closeAll := BuildServer(t, cfg)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		closeAll()
	})
	return &ServerFixture{Server: s, HTTP: hs, Sessions: sessions, Log: logs}
}

// ConfigDoc is the configuration a pgtools.json holding doc loads, as pgtools serve reads it
// (BuildServer validates it).
func ConfigDoc(t testing.TB, doc string) *config.Config {
	t.Helper()
	cfg, err := config.LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// BuildServer builds cfg's Server as pgtools serve does: validated config, pools, registry and
// session manager, logging into a buffer. closeAll rolls back the sessions and closes the pools.
func BuildServer(t testing.TB, cfg *config.Config) (s *runner.Server, sessions *session.Manager, logs *pgtest.SyncBuffer, closeAll func()) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs = &pgtest.SyncBuffer{}
	rt, err := runner.Build(context.Background(), cfg, zerolog.New(logs), runner.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rt.Server(), rt.Sessions(), logs, rt.Close
}

// Call posts a tool call and returns the status, the decoded body and the headers.
func (f *ServerFixture) Call(t testing.TB, token, tool, body string) (int, map[string]any, http.Header) {
	t.Helper()
	return apitest.Call(t, http.MethodPost, f.HTTP.URL+"/v1/tools/"+tool, token, body)
}

// Get sends a GET of path without a token and returns the status and the body.
func (f *ServerFixture) Get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(f.HTTP.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Metric returns the value of the sample of name whose labels include want, summed over the
// samples that match, from a /metrics scrape.
func (f *ServerFixture) Metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	status, text := f.Get(t, "/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, text)
	}
	return MetricValue(t, text, name, want)
}

// MetricValue is Metric over text, a /metrics answer already read: -1 when no sample of name
// has the labels of want.
func MetricValue(t testing.TB, text, name string, want map[string]string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	fam, ok := families[name]
	if !ok {
		return -1
	}
	sum, found := 0.0, false
next:
	for _, m := range fam.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	if !found {
		return -1
	}
	return sum
}
