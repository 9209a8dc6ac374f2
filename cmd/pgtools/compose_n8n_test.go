package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestComposeN8nPackage checks, without a Docker engine, that the compose file's n8n image gets
// the n8n package built from this repository and not a registry download: its Dockerfile copies
// the tarball npm pack makes (same name and version as package.json and the compose build
// argument), the build context is where the documented npm pack --pack-destination puts it, and
// the tarball is ignored by git there.
func TestComposeN8nPackage(t *testing.T) {
	t.Parallel()
	c, raw := loadCompose(t)
	var pkg struct{ Name, Version string }
	b, err := os.ReadFile("../../package.json")
	if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Name == "" || pkg.Version == "" {
		t.Fatalf("package.json: %v", err)
	}
	tarball := pkg.Name + "-" + pkg.Version + ".tgz" // npm's name for an unscoped package
	if npm, err := exec.LookPath("npm"); err == nil {
		cmd := exec.Command(npm, "pack", "--dry-run", "--json", "--ignore-scripts")
		cmd.Dir = "../.."
		out, err := cmd.Output()
		var packed []struct{ Filename string }
		if err != nil || json.Unmarshal(out, &packed) != nil || len(packed) != 1 {
			t.Fatalf("npm pack --dry-run --json: %v\n%s", err, out)
		}
		tarball = packed[0].Filename
	} else if os.Getenv("CI") != "" {
		t.Fatal("npm is needed to check the name npm pack gives the tarball")
	}

	n8n, ok := c.Services["n8n"]
	if !ok || n8n.Build == nil {
		t.Fatal("the n8n service must be built (build:), so it carries this repository's package")
	}
	ctxDir := filepath.Join(examplesDir, n8n.Build.Context)
	dfRaw, err := os.ReadFile(filepath.Join(ctxDir, orString(n8n.Build.Dockerfile, "Dockerfile")))
	if err != nil {
		t.Fatal(err)
	}
	df := string(dfRaw)
	if regexp.MustCompile(`npm (install|i) [^\n]*` + regexp.QuoteMeta(pkg.Name) + `@`).MatchString(df) {
		t.Errorf("the n8n image installs %s from the registry, where it is not published:\n%s", pkg.Name, df)
	}
	// The build argument the compose file passes is the default and package.json's version.
	arg := regexp.MustCompile(`(?m)^ARG PGTOOLS_NODES_VERSION=(\S+)$`).FindStringSubmatch(df)
	if arg == nil || arg[1] != pkg.Version || n8n.Build.Args["PGTOOLS_NODES_VERSION"] != pkg.Version {
		t.Errorf("PGTOOLS_NODES_VERSION: Dockerfile %v, compose %q; want package.json's %s in both", arg, n8n.Build.Args["PGTOOLS_NODES_VERSION"], pkg.Version)
	}
	// The COPY source, with the argument substituted, is the file npm pack writes.
	cp := regexp.MustCompile(`(?m)^COPY (\S+\.tgz) (\S+)$`).FindStringSubmatch(df)
	if cp == nil {
		t.Fatalf("the n8n Dockerfile copies no tarball:\n%s", df)
	}
	if src := strings.ReplaceAll(cp[1], "${PGTOOLS_NODES_VERSION}", n8n.Build.Args["PGTOOLS_NODES_VERSION"]); src != tarball {
		t.Errorf("the Dockerfile copies %s; npm pack writes %s", src, tarball)
	}
	if !strings.Contains(df, "tar -xzf "+cp[2]) || !strings.Contains(df, "/home/node/.n8n/nodes/node_modules/"+pkg.Name) {
		t.Errorf("the tarball is not unpacked into ~/.n8n/nodes/node_modules/%s:\n%s", pkg.Name, df)
	}
	// The documented command puts the tarball into the build context, which git ignores.
	rel, _ := filepath.Rel("../..", ctxDir)
	packCmd := "npm pack --pack-destination " + filepath.ToSlash(rel)
	install := readDoc(t, "docs/quick-start.md")
	for name, text := range map[string]string{"the Dockerfile": df, "docker-compose.yml": raw, "docs/quick-start.md": install} {
		if !strings.Contains(text, packCmd) {
			t.Errorf("%s does not say %q", name, packCmd)
		}
	}
	ignore, _ := os.ReadFile(filepath.Join(ctxDir, ".gitignore"))
	if !regexp.MustCompile(`(?m)^\*\.tgz$`).Match(ignore) {
		t.Errorf("%s/.gitignore does not ignore *.tgz", rel)
	}
}

// TestComposeHealthcheckIsLiveness: the compose file probes pgtools as Troubleshooting says a
// container must be probed, /healthz (pgtools healthcheck without --ready), like the image's own.
func TestComposeHealthcheckIsLiveness(t *testing.T) {
	t.Parallel()
	c, _ := loadCompose(t)
	hc := c.Services["pgtools"].Healthcheck
	if hc == nil || len(hc.Test) < 3 || hc.Test[2] != "healthcheck" || strings.Contains(strings.Join(hc.Test, " "), "--ready") {
		t.Errorf("pgtools healthcheck %v: want liveness, pgtools healthcheck without --ready", hc)
	}
	if !strings.Contains(readDoc(t, "docs/troubleshooting.md"), "the health check must probe `/healthz` (liveness), not\n  `/readyz`") {
		t.Errorf("docs/troubleshooting.md no longer says how a container is probed; keep it and this test in step")
	}
}
