package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// compose is the part of a Compose file these tests read.
type compose struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string            `yaml:"context"`
			Dockerfile string            `yaml:"dockerfile"`
			Args       map[string]string `yaml:"args"`
		} `yaml:"build"`
		Environment     map[string]string `yaml:"environment"`
		Secrets         []string          `yaml:"secrets"`
		Volumes         []string          `yaml:"volumes"`
		Ports           []string          `yaml:"ports"`
		StopGracePeriod string            `yaml:"stop_grace_period"`
		DependsOn       map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Secrets map[string]struct {
		Environment string `yaml:"environment"`
		File        string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

const examplesDir = "../../examples"

func loadCompose(t *testing.T) (compose, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(examplesDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(false)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("examples/docker-compose.yml is not valid YAML for Compose: %v", err)
	}
	return c, string(raw)
}

// mountSource returns the host path of the volume mounted at target, relative to examples/.
func mountSource(volumes []string, target string) (string, bool) {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return parts[0], true
		}
	}
	return "", false
}

// TestDockerCompose checks examples/docker-compose.yml without a Docker engine: the services,
// images, ports and health checks; that the runner reads only environment variables pgtools
// knows, that its config file passes validation with the secrets it names mounted, and that the
// environment the file needs is in .env.example.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	c, raw := loadCompose(t)
	for _, name := range []string{"postgres", "pgtools", "n8n"} {
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("service %s missing", name)
		}
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 {
			t.Errorf("%s: no healthcheck", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s beyond loopback", name, p)
			}
		}
		if s.Build != nil {
			df := filepath.Join(examplesDir, s.Build.Context, orString(s.Build.Dockerfile, "Dockerfile"))
			if _, err := os.Stat(df); err != nil {
				t.Errorf("%s: build file %s: %v", name, df, err)
			}
		}
		for _, sec := range s.Secrets {
			if _, ok := c.Secrets[sec]; !ok {
				t.Errorf("%s uses secret %s, which is not defined", name, sec)
			}
		}
		for dep, d := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok || d.Condition != "service_healthy" {
				t.Errorf("%s depends on %s (%q): want an existing service and service_healthy", name, dep, d.Condition)
			}
		}
	}
	if img := c.Services["postgres"].Image; !regexp.MustCompile(`^postgres:1[5-9]`).MatchString(img) {
		t.Errorf("postgres image %q: want postgres:15 or newer", img)
	}

	// The runner: known environment variables only, its health check a real subcommand.
	pg := c.Services["pgtools"]
	known := envNames(t)
	for k := range pg.Environment {
		if !slices.Contains(known, k) {
			t.Errorf("pgtools service sets %s, which pgtools does not read (it reads %v)", k, known)
		}
	}
	hc := pg.Healthcheck.Test
	if hc[0] != "CMD" || !strings.HasSuffix(hc[1], "/pgtools") || hc[2] != "healthcheck" {
		t.Errorf("pgtools healthcheck %v: want [CMD …/pgtools healthcheck …]", hc)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append(hc[2:], "--help"), &out, &errOut, envOf(nil)); code != 0 {
		t.Errorf("healthcheck flags %v are not pgtools healthcheck's: %s", hc[3:], errOut.String())
	}

	// Its config file validates, with the secrets it reads mounted where it expects them.
	cfgPath, ok := mountSource(pg.Volumes, pg.Environment["PGTOOLS_CONFIG"])
	if !ok {
		t.Fatalf("PGTOOLS_CONFIG=%s is not a mounted file", pg.Environment["PGTOOLS_CONFIG"])
	}
	cfgRaw, err := os.ReadFile(filepath.Join(examplesDir, cfgPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := config.ValidateConfig(cfgRaw); err != nil {
		t.Fatalf("%s: %v", cfgPath, err)
	}
	dir := t.TempDir()
	secretRef := regexp.MustCompile(`/run/secrets/([a-z_]+)`)
	for _, m := range secretRef.FindAllStringSubmatch(string(cfgRaw), -1) {
		if !slices.Contains(pg.Secrets, m[1]) {
			t.Errorf("%s reads %s, but the pgtools service does not mount secret %s", cfgPath, m[0], m[1])
		}
		os.WriteFile(filepath.Join(dir, m[1]), []byte("a-long-random-secret-value-0123\n"), 0o600)
	}
	local := filepath.Join(dir, "pgtools.json")
	os.WriteFile(local, []byte(secretRef.ReplaceAllString(string(cfgRaw), dir+"/$1")), 0o600)
	cfg, err := config.LoadConfigFile(local)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("%s with its secrets: %v", cfgPath, err)
	}
	if len(cfg.Tokens) == 0 || cfg.Listen != "0.0.0.0:8080" || !strings.HasSuffix(pg.Ports[0], ":8080") {
		t.Errorf("the runner must listen on 0.0.0.0:8080 with a token, published as 8080: %+v %v", cfg.Listen, pg.Ports)
	}
	if u, _ := url.Parse(cfg.Databases["default"].URL); u == nil || u.Hostname() != "postgres" {
		t.Errorf("the runner's database URL must point at the postgres service: %v", u)
	}
	grace, _ := time.ParseDuration(pg.StopGracePeriod)
	if grace <= cfg.Shutdown.DrainDelay()+cfg.Shutdown.Grace() {
		t.Errorf("stop_grace_period %s is not above drain delay %s + grace %s: Docker would kill a drain", grace, cfg.Shutdown.DrainDelay(), cfg.Shutdown.Grace())
	}

	// Every variable the file needs is in .env.example.
	envExample, err := os.ReadFile(filepath.Join(examplesDir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllStringSubmatch(raw, -1) {
		need[m[1]] = true
	}
	for _, s := range c.Secrets {
		if s.Environment != "" {
			need[s.Environment] = true
		}
		if s.File != "" {
			t.Errorf("a secret reads file %s; secrets come from .env so nothing secret is committed", s.File)
		}
	}
	for v := range need {
		if !regexp.MustCompile(`(?m)^` + v + `=`).Match(envExample) {
			t.Errorf("examples/.env.example lacks %s", v)
		}
	}
	// The n8n image's package: TestComposeN8nPackage.
}

// TestDockerfile checks the Dockerfile's promises: a multi-stage build of a static binary with the
// version stamped, the Go version of go.mod, a non-root final stage, a health check that pgtools
// understands.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage build, got FROM %v", froms)
	}
	gomod, _ := os.ReadFile("../../go.mod")
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if goVersion == nil || !strings.HasPrefix(froms[0][1], "golang:"+goVersion[1]) {
		t.Errorf("build stage %s does not match go.mod's go %v", froms[0][1], goVersion)
	}
	final := df[strings.LastIndex(df, "\nFROM "):]
	for _, want := range []string{"CGO_ENABLED=0", "-X github.com/pgtools/pgtools/runner/version.Version=${VERSION}", "./cmd/pgtools", "ARG VERSION"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final)
	if user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0") {
		t.Errorf("the final stage must run as a non-root user, got %v", user)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY (\w+) \./`).FindAllStringSubmatch(df, -1) {
		if _, err := os.Stat("../../" + m[1]); err != nil {
			t.Errorf("Dockerfile copies %s: %v", m[1], err)
		}
	}
	hc := regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD \["[^"]*pgtools", "(\w+)"`).FindStringSubmatch(df)
	if hc == nil || hc[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK must run pgtools healthcheck, got %v", hc)
	}
	// The listen address the image sets is one serve accepts with tokens and healthcheck can reach.
	if env := regexp.MustCompile(`(?m)^ENV PGTOOLS_LISTEN=(\S+)`).FindStringSubmatch(final); env == nil || localAddr(env[1]) != "127.0.0.1:8080" {
		t.Errorf("ENV PGTOOLS_LISTEN: %v", env)
	}
	// The static build itself works here: a binary without cgo that prints the stamped version.
	bin := filepath.Join(t.TempDir(), "pgtools")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/pgtools/pgtools/runner/version.Version=v9.9.9-test", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || strings.TrimSpace(string(out)) != "pgtools v9.9.9-test" {
		t.Errorf("version of the stamped binary: %q %v", out, err)
	}
}

// TestComposeInitScript runs examples/docker/initdb/01-pgtools-role.sh the way the postgres image
// does (psql as the superuser, secrets as files) against a test database, then serves the compose
// config against it: the role reads and writes the sample tables and nothing more.
func TestComposeInitScript(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("psql is needed to run the init script")
		}
		t.Skip("SKIPPED, psql not installed")
	}
	db := pgtest.New(t)
	admin, err := url.Parse(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pgtools_db_password")
	os.WriteFile(pwFile, []byte("compose-db-password-0123\n"), 0o600)
	role := db.RoleName("app")
	password, _ := admin.User.Password()
	script := exec.Command("bash", filepath.Join(examplesDir, "docker/initdb/01-pgtools-role.sh"))
	script.Env = append(os.Environ(), "PGHOST="+admin.Hostname(), "PGPORT="+orString(admin.Port(), "5432"), "PGPASSWORD="+password,
		"PGSSLMODE=disable", "POSTGRES_USER="+admin.User.Username(), "POSTGRES_DB="+db.Name,
		"PGTOOLS_DB_USER="+role, "PGTOOLS_DB_PASSWORD_FILE="+pwFile)
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("init script: %v\n%s", err, out)
	}
	if db.QueryInt(t, "select count(*) from pg_roles where rolname = $1 and not rolsuper and not rolcreatedb and not rolcreaterole", role) != 1 {
		t.Fatal("the init script did not create a least-privilege role")
	}

	// The compose config, pointed at this database as that role.
	cfgRaw, _ := os.ReadFile(filepath.Join(examplesDir, "config/docker-compose.json"))
	var doc map[string]any
	json.Unmarshal(cfgRaw, &doc)
	tokenFile := filepath.Join(dir, "pgtools_api_token")
	os.WriteFile(tokenFile, []byte("compose-api-token-0123456789\n"), 0o600)
	doc["listen"] = "127.0.0.1:0"
	doc["audit_log"] = filepath.Join(dir, "audit.log")
	doc["tokens"].([]any)[0].(map[string]any)["token_file"] = tokenFile
	def := doc["databases"].(map[string]any)["default"].(map[string]any)
	app := *admin
	app.User = url.User(role)
	app.Path = "/" + db.Name
	def["url"] = app.String()
	def["password_file"] = pwFile
	cfgFile := filepath.Join(dir, "pgtools.json")
	b, _ := json.Marshal(doc)
	os.WriteFile(cfgFile, b, 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", cfgFile}, &stdout, &stderr, envOf(nil)) }()
	addr := waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	call := func(tool, args string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"call", "--url", "http://" + addr, "--token", "compose-api-token-0123456789", tool, args}, &out, &errOut, envOf(nil))
		return code, out.String() + errOut.String()
	}
	for _, c := range []struct {
		tool, args string
		code       int
		want       string
	}{
		{"select_query", `{"table":"orders","columns":"id,status,total","limit":3}`, 0, `"rowCount": 3`},
		{"update_data", `{"table":"orders","set":{"status":"paid"},"where":"id = $1","params":[1],"autocommit":true}`, 0, `"affectedRows": 1`},
		{"execute_sql", `{"sql":"select pg_read_file('postgresql.conf')"}`, 1, "permission_denied"},
		{"execute_sql", `{"sql":"create table pwned (id int)","mode":"write","autocommit":true}`, 1, `"errorType"`},
		{"describe_schema", `{}`, 0, "customers"},
	} {
		code, out := call(c.tool, c.args)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s %s: exit %d, want %d and %q:\n%s", c.tool, c.args, code, c.code, c.want, out)
		}
	}
	if n := db.QueryInt(t, "select count(*) from pg_class where relname = 'pwned'"); n != 0 {
		t.Errorf("the role could create a table")
	}
	stopRun(t, cancel, done, "serve", &stderr, 30*time.Second)
	if strings.Contains(stderr.String(), "compose-db-password") {
		t.Errorf("serve logged the database password")
	}
	// The init script follows the advice serve gives at start.
	if strings.Contains(stderr.String(), "temp_file_limit") {
		t.Errorf("serve warned about temp_file_limit on the init script's role:\n%s", stderr.String())
	}
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
