package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools/session"
)

// k8sDir is the Kubernetes example (kubectl apply -k examples/kubernetes).
const k8sDir = examplesDir + "/kubernetes"

type k8sEnv struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []k8sEnv `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// k8sObject is the part of the example's objects these tests read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas                 int         `yaml:"replicas"`
		ServiceName              string      `yaml:"serviceName"`
		ClusterIP                string      `yaml:"clusterIP"`
		PublishNotReadyAddresses bool        `yaml:"publishNotReadyAddresses"`
		Selector                 yaml.Node   `yaml:"selector"` // a Service's map, a workload's matchLabels
		PodSelector              k8sSelector `yaml:"podSelector"`
		MinAvailable             int         `yaml:"minAvailable"`
		Ports                    []struct {
			Port       int `yaml:"port"`
			TargetPort any `yaml:"targetPort"`
		} `yaml:"ports"`
		Ingress []struct {
			From []struct {
				PodSelector k8sSelector `yaml:"podSelector"`
			} `yaml:"from"`
		} `yaml:"ingress"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
				Volumes                       []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// selectorLabels is a Service's selector or a workload's or policy's matchLabels.
func (o k8sObject) selectorLabels(t *testing.T) map[string]string {
	t.Helper()
	var s struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if o.Kind != "Service" {
		if err := o.Spec.Selector.Decode(&s); err != nil {
			t.Fatalf("%s/%s selector: %v", o.Kind, o.Metadata.Name, err)
		}
		return s.MatchLabels
	}
	var m map[string]string
	if err := o.Spec.Selector.Decode(&m); err != nil {
		t.Fatalf("Service/%s selector: %v", o.Metadata.Name, err)
	}
	return m
}

// selects reports whether every label of sel is on labels (and sel is not empty).
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// loadKubernetes reads every object of the files kustomization.yaml lists, by kind/name, and
// checks the list names exactly the manifests in the directory.
func loadKubernetes(t *testing.T) map[string]k8sObject {
	t.Helper()
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	raw, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var names []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			names = append(names, b)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(kust.Resources)), names) {
		t.Errorf("kustomization.yaml lists %v; the directory has %v", kust.Resources, names)
	}
	objs := map[string]k8sObject{}
	for _, name := range kust.Resources {
		raw, err := os.ReadFile(filepath.Join(k8sDir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(false)
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[key]; dup || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: object %q is unnamed or defined twice", name, key)
			}
			objs[key] = o
		}
	}
	return objs
}

func mustObject(t *testing.T, objs map[string]k8sObject, key string) k8sObject {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("examples/kubernetes has no %s (it has %v)", key, slices.Sorted(maps.Keys(objs)))
	}
	return o
}

func envValue(c k8sContainer, name string) (k8sEnv, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return k8sEnv{}, false
}

// mountOf is the volume mounted at the directory holding path, and path's name in it.
func mountOf(t *testing.T, o k8sObject, c k8sContainer, path string) (volume, key string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) == m.MountPath {
			return m.Name, filepath.Base(path)
		}
	}
	t.Fatalf("%s: no volume is mounted where %s lives", o.Metadata.Name, path)
	return "", ""
}

// TestKubernetesManifests checks examples/kubernetes without a cluster: the StatefulSet's replicas
// and the router's map agree (one line per pod, each the tag session.ReplicaTag gives its name,
// sent to that pod's headless DNS name), the router reads the runner's session header, probes
// and ports are the runner's, the config file validates with the Secret's keys where it reads
// them, the container reads only variables pgtools knows, the grace period covers a drain, and
// every selector selects what it is meant to. TestFleetKubernetesRouter (runner/fleet) runs the
// router's template in a real NGINX.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t)
	sts := mustObject(t, objs, "StatefulSet/pgtools")
	if sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet pgtools: %d replicas, want 3", sts.Spec.Replicas)
	}
	podLabels := sts.Spec.Template.Metadata.Labels
	if !selects(sts.selectorLabels(t), podLabels) {
		t.Errorf("StatefulSet pgtools does not select its own pods")
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("StatefulSet pgtools: want one container")
	}
	c := sts.Spec.Template.Spec.Containers[0]

	// The headless Service gives each pod its DNS name; another Service spreads stateless calls.
	headless := mustObject(t, objs, "Service/"+sts.Spec.ServiceName)
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses || !selects(headless.selectorLabels(t), podLabels) {
		t.Errorf("Service %s must be headless (clusterIP None), publish pods that are not ready (a draining replica still holds sessions) and select the pods", sts.Spec.ServiceName)
	}
	stateless := mustObject(t, objs, "Service/pgtools")
	if stateless.Spec.ClusterIP == "None" || !selects(stateless.selectorLabels(t), podLabels) {
		t.Errorf("Service pgtools must be a ClusterIP Service over the pgtools pods")
	}

	// The container: known variables only, its replica id the pod's name, args a real command.
	known := envNames(t)
	for _, e := range c.Env {
		if !slices.Contains(known, e.Name) {
			t.Errorf("the pgtools container sets %s, which pgtools does not read (it reads %v)", e.Name, known)
		}
	}
	if e, _ := envValue(c, "PGTOOLS_REPLICA_ID"); e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("PGTOOLS_REPLICA_ID must come from the pod's name (metadata.name): the router's map is built from it")
	}
	if len(c.Args) != 1 || c.Args[0] != "serve" {
		t.Errorf("the pgtools container's args %v: want [serve]", c.Args)
	}

	// Ports and probes: the runner's port (DefaultListen's, and the config's listen), /healthz for
	// liveness, /readyz for readiness.
	_, defPort, _ := net.SplitHostPort(config.DefaultListen)
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, pr := range []struct {
		what  string
		probe *k8sProbe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil || pr.probe.HTTPGet.Path != pr.path || strconv.Itoa(ports[pr.probe.HTTPGet.Port]) != defPort {
			t.Errorf("%s probe: want GET %s on the container port %s", pr.what, pr.path, defPort)
		}
	}
	for _, svc := range []k8sObject{headless, stateless} {
		for _, p := range svc.Spec.Ports {
			if tp, _ := p.TargetPort.(string); strconv.Itoa(ports[tp]) != defPort {
				t.Errorf("Service %s targets port %v, not the container's %s", svc.Metadata.Name, p.TargetPort, defPort)
			}
		}
	}

	// The config file: from the ConfigMap at PGTOOLS_CONFIG; it reads its secrets from files
	// that the Secret's keys provide; with them it loads and validates.
	volumes := map[string]string{}
	for _, v := range sts.Spec.Template.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			volumes[v.Name] = "ConfigMap/" + v.ConfigMap.Name
		case v.Secret != nil:
			volumes[v.Name] = "Secret/" + v.Secret.SecretName
		}
	}
	cfgEnv, _ := envValue(c, "PGTOOLS_CONFIG")
	vol, key := mountOf(t, sts, c, cfgEnv.Value)
	cm := mustObject(t, objs, volumes[vol])
	cfgRaw := cm.Data[key]
	if err := config.ValidateConfig([]byte(cfgRaw)); err != nil {
		t.Fatalf("%s %s: %v", volumes[vol], key, err)
	}
	dir := t.TempDir()
	local := cfgRaw
	for _, m := range regexp.MustCompile(`"[a-z_]+_file":\s*"([^"]+)"`).FindAllStringSubmatch(cfgRaw, -1) {
		vol, key := mountOf(t, sts, c, m[1])
		secret := mustObject(t, objs, volumes[vol])
		val, ok := secret.StringData[key]
		if !strings.HasPrefix(volumes[vol], "Secret/") || !ok {
			t.Errorf("the config reads %s, but %s (mounted there) has no key %s", m[1], volumes[vol], key)
			continue
		}
		os.WriteFile(filepath.Join(dir, key), []byte(val), 0o600)
		local = strings.ReplaceAll(local, m[1], filepath.Join(dir, key))
	}
	os.WriteFile(filepath.Join(dir, "pgtools.json"), []byte(local), 0o600)
	cfg, err := config.LoadConfigFile(filepath.Join(dir, "pgtools.json"))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("the ConfigMap's config with the Secret's values: %v", err)
	}
	if _, port, _ := net.SplitHostPort(cfg.Listen); port != defPort || !strings.HasPrefix(cfg.Listen, "0.0.0.0:") {
		t.Errorf("the config listens on %s: want 0.0.0.0:%s (beyond loopback, on the probed port)", cfg.Listen, defPort)
	}
	preStop := 0
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	if preStop == 0 {
		t.Errorf("the pgtools container has no preStop sleep")
	}
	drain := time.Duration(preStop)*time.Second + cfg.Shutdown.DrainDelay() + cfg.Shutdown.Grace()
	if grace := time.Duration(sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= drain {
		t.Errorf("terminationGracePeriodSeconds %s is not above preStop + drain delay + grace (%s): the kubelet would kill a drain", grace, drain)
	}

	checkRouter(t, objs, sts, defPort)

	// A disruption budget and a network policy over the same pods.
	if pdb := mustObject(t, objs, "PodDisruptionBudget/pgtools"); !selects(pdb.selectorLabels(t), podLabels) || pdb.Spec.MinAvailable < 1 || pdb.Spec.MinAvailable >= sts.Spec.Replicas {
		t.Errorf("PodDisruptionBudget pgtools must select the pods and keep 1..replicas-1 of them")
	}
	np := mustObject(t, objs, "NetworkPolicy/pgtools")
	router := mustObject(t, objs, "Deployment/pgtools-router")
	if !selects(np.Spec.PodSelector.MatchLabels, podLabels) || len(np.Spec.Ingress) == 0 || len(np.Spec.Ingress[0].From) == 0 ||
		!selects(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, router.Spec.Template.Metadata.Labels) {
		t.Errorf("NetworkPolicy pgtools must let the router's pods reach the pgtools pods")
	}
}

// checkRouter checks the router's template: its map on the runner's header sends each replica's
// tag to that pod, and nothing else; its variables are the container's; its probes are served.
func checkRouter(t *testing.T, objs map[string]k8sObject, sts k8sObject, port string) {
	dep := mustObject(t, objs, "Deployment/pgtools-router")
	rc := dep.Spec.Template.Spec.Containers[0]
	if !selects(dep.selectorLabels(t), dep.Spec.Template.Metadata.Labels) ||
		!selects(mustObject(t, objs, "Service/pgtools-router").selectorLabels(t), dep.Spec.Template.Metadata.Labels) {
		t.Errorf("the router Deployment and Service must select the router's pods")
	}
	var cmName string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	var tmplKey, tmpl string
	for k, v := range mustObject(t, objs, "ConfigMap/"+cmName).Data {
		tmplKey, tmpl = k, v
	}
	if vol, _ := mountOf(t, dep, rc, "/etc/nginx/templates/"+tmplKey); !strings.HasSuffix(tmplKey, ".conf.template") || vol == "" {
		t.Errorf("the router's ConfigMap key %s must be a *.conf.template in /etc/nginx/templates (the image fills it in)", tmplKey)
	}

	header := "$http_" + strings.ToLower(strings.ReplaceAll(invoke.SessionHeader, "-", "_"))
	mapHead := regexp.MustCompile(`map\s+(\S+)\s+\$pgtools_backend\s*\{`).FindStringSubmatch(tmpl)
	if mapHead == nil || mapHead[1] != header {
		t.Errorf("the router's map must read %s (the runner's %s header): %v", header, invoke.SessionHeader, mapHead)
	}
	routes := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*~\*\^([0-9a-fA-F]{8})-\s+(\S+);`).FindAllStringSubmatch(tmpl, -1) {
		routes[strings.ToLower(m[1])] = m[2]
	}
	want := map[string]string{}
	for i := range sts.Spec.Replicas {
		pod := fmt.Sprintf("%s-%d", sts.Metadata.Name, i)
		want[session.ReplicaTag(pod)] = fmt.Sprintf("%s.%s.${POD_NAMESPACE}.svc.${CLUSTER_DOMAIN}:%s", pod, sts.Spec.ServiceName, port)
	}
	if !maps.Equal(routes, want) {
		t.Errorf("the router's map routes %v; the StatefulSet's pods need exactly %v", routes, want)
	}
	if !strings.Contains(tmpl, "default       pgtools_any;") || !regexp.MustCompile(`upstream pgtools_any \{\s*server pgtools:`+port+`;`).MatchString(tmpl) {
		t.Errorf("calls without a session must go to upstream pgtools_any, the pgtools Service on port %s", port)
	}

	// ${NAME}: the container's variables, or the resolvers the image sets when asked to.
	provided := map[string]bool{}
	for _, e := range rc.Env {
		provided[e.Name] = true
	}
	if provided["NGINX_ENTRYPOINT_LOCAL_RESOLVERS"] {
		provided["NGINX_LOCAL_RESOLVERS"] = true
	}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`).FindAllStringSubmatch(tmpl, -1) {
		if !provided[m[1]] {
			t.Errorf("the router's template uses ${%s}, which its container does not set", m[1])
		}
	}
	for _, p := range []*k8sProbe{rc.LivenessProbe, rc.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || !strings.Contains(tmpl, "location = "+p.HTTPGet.Path+" {") {
			t.Errorf("a router probe is not served by the template's own location")
		}
	}
}
