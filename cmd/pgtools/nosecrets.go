package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// withoutSecrets is a copy of a config file in which every file that holds a secret or TLS
// material is replaced by a placeholder, so check-config --no-secrets can check the structure
// where those files are not mounted (CI, a laptop).
type withoutSecrets struct {
	// Path is the copy to load instead of the original.
	Path string
	// Skipped lists, per key, the files that were not read, e.g.
	// "tokens[0].token_file /run/secrets/api_token".
	Skipped []string
	// restore maps every placeholder path (and the copy's path) back to what the file said, for
	// messages and the printed configuration.
	restore *strings.Replacer
}

// Restore rewrites placeholder paths in s back to the original file's paths.
func (w *withoutSecrets) Restore(s string) string { return w.restore.Replace(s) }

// tlsFileSetting finds sslrootcert, sslcert and sslkey in a URL's query or in key=value form.
var tlsFileSetting = regexp.MustCompile(`\b(sslrootcert|sslcert|sslkey)=([^&\s'"]+)`)

// configWithoutSecrets writes into dir a copy of the config file at path with placeholders for
// token_file, password_file, url_file, n8n.token_file and the sslrootcert/sslcert/sslkey files of every URL.
// A file that is not a JSON object is copied as it is, for the loader to report.
func configWithoutSecrets(path, dir string) (*withoutSecrets, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	copyPath := filepath.Join(dir, filepath.Base(path))
	w := &withoutSecrets{Path: copyPath}
	pairs := []string{copyPath, path}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers stay as written, so the schema judges the original values
	if dec.Decode(&doc) != nil || doc == nil {
		w.restore = strings.NewReplacer(pairs...)
		return w, os.WriteFile(copyPath, raw, 0o600)
	}
	var tlsFiles *placeholderTLS
	n := 0
	placeholder := func(where, original, content string) (string, error) {
		n++
		p := filepath.Join(dir, fmt.Sprintf("placeholder-%d", n))
		pairs = append(pairs, p, original)
		w.Skipped = append(w.Skipped, where+" "+original)
		return p, os.WriteFile(p, []byte(content), 0o600)
	}
	var firstErr error
	keep := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	// TLS files in a connection string: a generated certificate and key stand in for them.
	tlsInURL := func(where, url string) string {
		return tlsFileSetting.ReplaceAllStringFunc(url, func(m string) string {
			kv := tlsFileSetting.FindStringSubmatch(m)
			if kv[2] == "system" && kv[1] == "sslrootcert" {
				return m
			}
			if tlsFiles == nil {
				var err error
				if tlsFiles, err = newPlaceholderTLS(); err != nil {
					keep(err)
					return m
				}
			}
			content := tlsFiles.cert
			if kv[1] == "sslkey" {
				content = tlsFiles.key
			}
			p, err := placeholder(where+" "+kv[1], kv[2], content)
			keep(err)
			return kv[1] + "=" + p
		})
	}
	if tokens, ok := doc["tokens"].([]any); ok {
		for i, t := range tokens {
			tok, ok := t.(map[string]any)
			if f, isStr := tok["token_file"].(string); ok && isStr && f != "" {
				// Unique and long enough, as the token checks demand.
				p, err := placeholder(fmt.Sprintf("tokens[%d].token_file", i), f, fmt.Sprintf("placeholder-token-%d-%s", i, randomHex(16)))
				keep(err)
				tok["token_file"] = p
			}
		}
	}
	if n, ok := doc["n8n"].(map[string]any); ok {
		if f, isStr := n["token_file"].(string); isStr && f != "" {
			p, err := placeholder("n8n.token_file", f, "placeholder-n8n-token-"+randomHex(16))
			keep(err)
			n["token_file"] = p
		}
	}
	if dbs, ok := doc["databases"].(map[string]any); ok {
		names := make([]string, 0, len(dbs))
		for name := range dbs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			db, ok := dbs[name].(map[string]any)
			if !ok {
				continue
			}
			where := "databases." + name
			if u, ok := db["url"].(string); ok {
				db["url"] = tlsInURL(where+".url", u)
			}
			if f, ok := db["url_file"].(string); ok && f != "" {
				p, err := placeholder(where+".url_file", f+" (its connection string is not checked)",
					"postgres://not-read@url-file-not-read.invalid:5432/not-read?sslmode=verify-full")
				keep(err)
				db["url_file"] = p
			}
			if f, ok := db["password_file"].(string); ok && f != "" {
				p, err := placeholder(where+".password_file", f, "placeholder-password")
				keep(err)
				db["password_file"] = p
			}
		}
	}
	if firstErr != nil {
		return nil, fmt.Errorf("writing placeholders: %w", firstErr)
	}
	// Longest first, so placeholder-1 does not rewrite the front of placeholder-12.
	type pair struct{ from, to string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		to := strings.TrimSuffix(pairs[i+1], " (its connection string is not checked)")
		ps = append(ps, pair{pairs[i], to})
	}
	sort.Slice(ps, func(i, j int) bool { return len(ps[i].from) > len(ps[j].from) })
	flat := make([]string, 0, 2*len(ps))
	for _, p := range ps {
		flat = append(flat, p.from, p.to)
	}
	w.restore = strings.NewReplacer(flat...)
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("copying the config file: %w", err)
	}
	return w, os.WriteFile(copyPath, out, 0o600)
}

// placeholderTLS is a throwaway self-signed certificate and its key, in PEM, which the
// connection string parser accepts as CA, client certificate and client key alike.
type placeholderTLS struct{ cert, key string }

func newPlaceholderTLS() (*placeholderTLS, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgtools check-config placeholder"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &placeholderTLS{
		cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		key:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
	}, nil
}
