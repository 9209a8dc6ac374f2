package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pgtools/pgtools/tools/session"
)

// k8sDir holds the Kubernetes example whose router configuration TestFleetKubernetesRouter runs.
const k8sDir = "../../examples/kubernetes"

// k8sObject is the part of a Kubernetes object this test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas    int    `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Template    struct {
			Spec struct {
				Containers []struct {
					LivenessProbe  k8sProbe `yaml:"livenessProbe"`
					ReadinessProbe k8sProbe `yaml:"readinessProbe"`
					Env            []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// k8sProbe is a container's HTTP probe.
type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

// loadK8s reads every object of one manifest file, by kind and name.
func loadK8s(t *testing.T, file string) map[string]k8sObject {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(k8sDir, file))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
}

// envsubst fills in ${NAME} and $NAME for the names in vars only, as the nginx image's
// envsubst does with the container's variables; NGINX's own $variables stay.
func envsubst(text string, vars map[string]string) string {
	return regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`).ReplaceAllStringFunc(text, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := vars[name]; ok && (m == "$"+name || m == "${"+name+"}") {
			return v
		}
		return m
	})
}

// TestFleetKubernetesRouter runs the router template of examples/kubernetes/router.yaml in a real
// NGINX in front of three replicas named as the StatefulSet names its pods (pgtools-0, …), with
// two stand-ins for what the cluster provides: each pod's DNS name becomes its replica's loopback
// address, and the pgtools Service (kube-proxy's spread over the ready pods) becomes an upstream
// of the three addresses. Everything else is the template as the image's envsubst leaves it.
// Checked: stateless calls spread, calls with X-PgTools-Session reach the replica holding the
// session, and after a replica stops its sessions are answered session_not_found (naming its tag)
// by another replica instead of a proxy error.
func TestFleetKubernetesRouter(t *testing.T) {
	sts := loadK8s(t, "statefulset.yaml")["StatefulSet/pgtools"]
	router := loadK8s(t, "router.yaml")
	tmpl := router["ConfigMap/pgtools-router"].Data["pgtools.conf.template"]
	if sts.Spec.Replicas == 0 || tmpl == "" {
		t.Fatal("statefulset.yaml or router.yaml lost the StatefulSet pgtools or the template")
	}
	var ids []string
	for i := range sts.Spec.Replicas {
		ids = append(ids, fmt.Sprintf("%s-%d", sts.Metadata.Name, i))
	}
	// The configmap's fleet settings: state in the default database, a fleet secret, no peer
	// list (the state's registry finds the replicas).
	secret := filepath.Join(t.TempDir(), "fleet-secret")
	if err := os.WriteFile(secret, []byte("fleet-secret-0123456789abcdef0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, dir := startReplicasWith(t, func(*replica, []*replica) []string {
		return []string{"--state", "default", "--fleet-secret-file", secret}
	}, ids...)
	pc := sts.Spec.Template.Spec.Containers[0]
	for _, r := range f.replicas {
		for _, path := range []string{pc.LivenessProbe.HTTPGet.Path, pc.ReadinessProbe.HTTPGet.Path} {
			resp, err := http.Get("http://" + r.addr + path)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the StatefulSet's probe %q on %s: %v %v", path, r.id, resp, err)
			}
			resp.Body.Close()
		}
	}

	// The router container's variables, with the values a cluster would give them.
	vars := map[string]string{"NGINX_LOCAL_RESOLVERS": "127.0.0.1", "POD_NAMESPACE": "fleet"}
	for _, e := range router["Deployment/pgtools-router"].Spec.Template.Spec.Containers[0].Env {
		if e.Value != "" {
			vars[e.Name] = e.Value
		}
	}
	conf := envsubst(tmpl, vars)
	var all strings.Builder
	for _, r := range f.replicas {
		pod := fmt.Sprintf("%s.%s.%s.svc.%s:8080", r.id, sts.Spec.ServiceName, vars["POD_NAMESPACE"], vars["CLUSTER_DOMAIN"])
		if !strings.Contains(conf, pod) {
			t.Fatalf("the router template does not route to pod %s", pod)
		}
		conf = strings.ReplaceAll(conf, pod, r.addr)
		fmt.Fprintf(&all, "server %s;\n", r.addr)
	}
	if !strings.Contains(conf, "server pgtools:8080;") {
		t.Fatal("the router template lost its upstream on the pgtools Service")
	}
	conf = strings.Replace(conf, "server pgtools:8080;\n", all.String(), 1)
	listen := regexp.MustCompile(`listen (\d+);`).FindStringSubmatch(conf)
	if listen == nil {
		t.Fatal("the router template has no listen port")
	}
	f.proxy = freeAddr(t)
	conf = strings.Replace(conf, listen[0], "listen "+f.proxy+";", 1)

	// The image's nginx.conf around the template: only the scratch paths and the X-Upstream
	// header that tells the test which replica answered.
	var main strings.Builder
	fmt.Fprintf(&main, "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\nevents { worker_connections 512; }\nhttp {\n", dir, dir)
	for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&main, "  %s_temp_path %s/%s;\n", p, dir, p)
	}
	main.WriteString("  access_log off;\n  add_header X-Upstream $upstream_addr always;\n")
	main.WriteString(conf)
	main.WriteString("}\n")
	startNGINX(t, dir, f.proxy, main.String())

	c := &http.Client{Timeout: 10 * time.Second}
	if resp, err := c.Get("http://" + f.proxy + "/router-healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the router's probe path: %v %v", resp, err)
	}

	per := map[string]int{}
	for i := range 60 {
		a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = %d"}`, i%50+1), "")
		if a.status != 200 || a.replica == nil {
			t.Fatalf("stateless call: %d %v", a.status, a.body)
		}
		per[a.replica.id]++
	}
	for _, r := range f.replicas {
		if per[r.id] == 0 {
			t.Errorf("replica %s served none of 60 stateless calls: %v", r.id, per)
		}
	}

	type sess struct {
		id     string
		holder *replica
	}
	var open []sess
	for range 9 {
		a := f.call(t, c, "pg_tx", `{"action":"begin"}`, "")
		id, _ := a.body["session_id"].(string)
		if a.status != 200 || a.replica == nil || f.byTag[session.TagOf(id)] != a.replica {
			t.Fatalf("begin: %d %v on %v", a.status, a.body, a.replica)
		}
		open = append(open, sess{id, a.replica})
	}
	routed := 0
	for i, s := range open {
		for range 2 {
			a := f.call(t, c, "update_data", fmt.Sprintf(`{"table":"items","set":{"name":"k8s"},"where":"id = %d","session_id":%q}`, i+1, s.id), s.id)
			if a.status == 200 && a.replica == s.holder {
				routed++
			} else {
				t.Errorf("session %s (on %s): %d %v via %v", s.id, s.holder.id, a.status, a.body, a.replica)
			}
		}
	}

	// Without the header (an MCP client, say) the router spreads a session's calls over the
	// pgtools Service; the replicas forward them to the one holding the session.
	forwarded := 0
	for i := range 3 {
		b := f.call(t, c, "pg_tx", `{"action":"begin"}`, "")
		id, _ := b.body["session_id"].(string)
		if b.status != 200 || id == "" {
			t.Fatalf("begin: %d %v", b.status, b.body)
		}
		for _, call := range [][2]string{
			{"update_data", fmt.Sprintf(`{"table":"items","set":{"name":"k8s-fwd"},"where":"id = %d","session_id":%q}`, 20+i, id)},
			{"pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id)},
		} {
			a := f.call(t, c, call[0], call[1], "")
			if a.status != 200 {
				t.Fatalf("%s in session %s without the header: %d %v via %v", call[0], id, a.status, a.body, a.replica)
			}
			if a.replica != b.replica {
				forwarded++
			}
		}
	}

	victim := f.replicas[0]
	stopReplica(t, victim)
	lost, kept := 0, 0
	for _, s := range open {
		a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = 1","session_id":%q}`, s.id), s.id)
		if s.holder != victim {
			if a.status != 200 || a.replica != s.holder {
				t.Errorf("session on %s disturbed by the stop of %s: %d %v via %v", s.holder.id, victim.id, a.status, a.body, a.replica)
			}
			kept++
			continue
		}
		if a.status != 404 || a.body["errorType"] != "session_not_found" || a.replica == nil || a.replica == victim ||
			!strings.Contains(fmt.Sprint(a.body["error"]), "tag "+session.ReplicaTag(victim.id)) {
			t.Errorf("session of the stopped replica: %d %v via %v", a.status, a.body, a.replica)
		}
		lost++
	}
	t.Logf("K8S router: 60 stateless calls per replica %v; %d of %d session calls reached their replica; %d of 6 header-less session calls forwarded through the state's registry; after %s stopped, %d of its sessions answered session_not_found from another replica, %d others untouched",
		per, routed, 2*len(open), forwarded, victim.id, lost, kept)
	if lost == 0 || kept == 0 {
		t.Errorf("want sessions on both sides of the stop (lost %d, kept %d)", lost, kept)
	}
}
