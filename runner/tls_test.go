package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// testPKI is a throwaway certificate authority.
type testPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate as PEM
}

func newTestPKI(t *testing.T, dir, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := writeFile(t, dir, name+".crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	return &testPKI{cert: cert, key: key, file: file}
}

// issue returns a server certificate and key (PEM) for the given IP addresses.
func (p *testPKI) issue(t *testing.T, ips ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "pgtools test server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// TestTLSModes runs PostgreSQL with TLS (a certificate for 127.0.0.1 only, from a test CA) and
// checks what each sslmode of a database URL does through the runner: verify-full with the
// right CA connects over TLS; the wrong CA, or a host name the certificate does not name, is a
// connection_error that shows neither the URL nor the CA path; verify-ca does not check the name.
func TestTLSModes(t *testing.T) {
	t.Parallel()
	cluster := startLocalPG(t, 0)
	dir := t.TempDir()
	ca := newTestPKI(t, dir, "test-ca")
	other := newTestPKI(t, dir, "other-ca")
	certPEM, keyPEM := ca.issue(t, "127.0.0.1")

	// The server's files live in its data directory, owned by the user postgres runs as.
	data := cluster.DataDir()
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for name, content := range map[string][]byte{"server.crt": certPEM, "server.key": keyPEM} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin.Close(ctx)

	port := cluster.Port()
	dsn := func(host, mode, rootcert string) string {
		return fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=%s&sslrootcert=%s&connect_timeout=3", host, port, mode, rootcert)
	}
	cfg := &Config{Tokens: []Token{{Secret: allToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]DatabaseConfig{
			"full":       {URL: dsn("127.0.0.1", "verify-full", ca.file)},
			"wrong_ca":   {URL: dsn("127.0.0.1", "verify-full", other.file)},
			"wrong_name": {URL: dsn("localhost", "verify-full", ca.file)},
			"ca_only":    {URL: dsn("localhost", "verify-ca", ca.file)},
		}}
	f := newServerFixture(t, cfg)
	sslQuery := `{"database":"%s","sql":"select ssl, version from pg_stat_ssl where pid = pg_backend_pid()"}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The reload takes effect asynchronously.
		status, body, _ := f.call(t, allToken, "execute_sql", fmt.Sprintf(sslQuery, "full"))
		if status == 200 {
			rows := body["data"].([]any)
			if row := rows[0].(map[string]any); row["ssl"] != true || !strings.HasPrefix(row["version"].(string), "TLS") {
				t.Fatalf("verify-full connected without TLS: %v", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("verify-full with the right CA: %d %v", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := f.call(t, allToken, "execute_sql", fmt.Sprintf(sslQuery, "ca_only")); status != 200 {
		t.Errorf("verify-ca against a certificate without the host name: %d %v", status, body)
	}
	for _, name := range []string{"wrong_ca", "wrong_name"} {
		status, body, _ := f.call(t, allToken, "execute_sql", fmt.Sprintf(sslQuery, name))
		msg := fmt.Sprint(body)
		if status != 503 || body["errorType"] != "connection_error" || strings.Contains(msg, "postgres://") || strings.Contains(msg, dir) {
			t.Errorf("%s: want connection_error without the URL or CA path, got %d %v", name, status, body)
		}
	}
	if status, text := f.get(t, "/readyz"); status != 503 || !strings.Contains(text, "2 of 4 databases") {
		t.Errorf("/readyz with two databases failing TLS verification: %d %s", status, text)
	}
	logs := f.log.String()
	if !strings.Contains(logs, `"database":"wrong_ca"`) || !strings.Contains(logs, "certificate signed by unknown authority") ||
		!strings.Contains(logs, `"database":"wrong_name"`) {
		t.Errorf("the log does not name the databases that fail and why: %s", logs)
	}
}
