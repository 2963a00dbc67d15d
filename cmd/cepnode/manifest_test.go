package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The manifests are checked offline, as Kubernetes would read them: each
// object decoded strictly into its k8s.io/api type (a misspelt or
// misplaced field fails), the kustomizations rendered by kustomize
// itself (krusty, what `kubectl apply -k` runs), and the environment of
// each pod expanded as the kubelet does, so the names a node dials are
// the ones it would get.

const k8sDir = "../../deploy/k8s"

var baseDir = filepath.Join(k8sDir, "base")

// objects is a rendered set of manifests, by kind and name.
type objects struct {
	namespaces      map[string]*corev1.Namespace
	services        map[string]*corev1.Service
	serviceAccounts map[string]*corev1.ServiceAccount
	statefulSets    map[string]*appsv1.StatefulSet
	pdbs            map[string]*policyv1.PodDisruptionBudget
}

// decodeObjects decodes YAML documents strictly into their types.
func decodeObjects(t *testing.T, where string, docs [][]byte) *objects {
	t.Helper()
	o := &objects{namespaces: map[string]*corev1.Namespace{}, services: map[string]*corev1.Service{}, serviceAccounts: map[string]*corev1.ServiceAccount{},
		statefulSets: map[string]*appsv1.StatefulSet{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for _, doc := range docs {
		if len(bytes.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(doc, nil))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj any
		var name func() string
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			v := &corev1.Namespace{}
			obj, name = v, func() string { o.namespaces[v.Name] = v; return v.Name }
		case "v1 Service":
			v := &corev1.Service{}
			obj, name = v, func() string { o.services[v.Name] = v; return v.Name }
		case "v1 ServiceAccount":
			v := &corev1.ServiceAccount{}
			obj, name = v, func() string { o.serviceAccounts[v.Name] = v; return v.Name }
		case "apps/v1 StatefulSet":
			v := &appsv1.StatefulSet{}
			obj, name = v, func() string { o.statefulSets[v.Name] = v; return v.Name }
		case "policy/v1 PodDisruptionBudget":
			v := &policyv1.PodDisruptionBudget{}
			obj, name = v, func() string { o.pdbs[v.Name] = v; return v.Name }
		default:
			t.Fatalf("%s: unexpected object %s %s", where, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: %s: %v", where, tm.Kind, err)
		}
		if name() == "" {
			t.Fatalf("%s: a %s without a name", where, tm.Kind)
		}
	}
	return o
}

// readFiles decodes the base's manifests as `kubectl apply -f` would.
func readFiles(t *testing.T, names ...string) *objects {
	t.Helper()
	var docs [][]byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(baseDir, n))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			docs = append(docs, []byte(d))
		}
	}
	return decodeObjects(t, strings.Join(names, ", "), docs)
}

// render runs kustomize on dir, as kubectl apply -k does.
func render(t *testing.T, dir string) *objects {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	return decodeObjects(t, dir, docs)
}

// expandEnv is the container's environment as the kubelet sets it: each
// value's $(VAR) replaced by a variable declared before it ($$ an escaped
// $, an unknown reference left as it is), fieldRef values from the pod.
func expandEnv(t *testing.T, c corev1.Container, pod map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	ref := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, ok := pod[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("%s: fieldRef %s is not a field the test knows", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			env[e.Name] = v
		case e.ValueFrom != nil:
			t.Fatalf("%s: a valueFrom the test does not know", e.Name)
		default:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(m string) string {
				if m == "$$" {
					return "$"
				}
				if v, ok := env[m[2:len(m)-1]]; ok {
					return v
				}
				return m
			})
		}
	}
	return env
}

func container(t *testing.T, s *appsv1.StatefulSet, name string) corev1.Container {
	t.Helper()
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("statefulset %s has no container %s", s.Name, name)
	return corev1.Container{}
}

func servicePort(t *testing.T, svc *corev1.Service, name string) int32 {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return p.Port
		}
	}
	t.Fatalf("service %s has no port %s", svc.Name, name)
	return 0
}

// checkCluster checks a rendered cluster in namespace ns, of replicas
// nodes, against what the nodes need of it: every object in ns; every
// name a node dials (peers, join, NATS) that of a Service of ns, pod of
// its headless Service, or an address outside the render — never another
// namespace's, and never one that assumes the cluster domain; the pods
// spread across zones and machines, with a ServiceAccount of their own
// that mounts no token; every image pinned.
func checkCluster(t *testing.T, o *objects, ns string, replicas int32) {
	t.Helper()
	if len(o.namespaces) != 1 || o.namespaces[ns] == nil {
		t.Errorf("namespaces %v, want only %s", keys(o.namespaces), ns)
	}
	for kind, m := range map[string]map[string]metav1.Object{"service": metaOf(o.services), "serviceaccount": metaOf(o.serviceAccounts), "statefulset": metaOf(o.statefulSets), "pdb": metaOf(o.pdbs)} {
		for name, obj := range m {
			if obj.GetNamespace() != ns {
				t.Errorf("%s %s is in namespace %q, not %s", kind, name, obj.GetNamespace(), ns)
			}
		}
	}
	sts := o.statefulSets["cepnode"]
	if sts == nil {
		t.Fatalf("no statefulset cepnode: %v", keys(o.statefulSets))
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != replicas {
		t.Errorf("cepnode replicas %v, want %d", sts.Spec.Replicas, replicas)
	}
	headless := o.services[sts.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("the statefulset's service %q is not a headless service publishing pods not ready", sts.Spec.ServiceName)
	}
	podLabels := sts.Spec.Template.Labels
	for k, v := range headless.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("headless service selects %s=%s, the pods have %q", k, v, podLabels[k])
		}
	}

	// what a node dials resolves to something of this render
	resolvable := func(what, hostport, portName string) {
		t.Helper()
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			t.Errorf("%s %q: %v", what, hostport, err)
			return
		}
		if strings.Contains(host, "$(") || strings.Contains(host, "cluster.local") {
			t.Errorf("%s %q: an unexpanded variable, or a cluster domain assumed", what, hostport)
		}
		labels := strings.Split(host, ".")
		var svcName string
		switch {
		case len(labels) == 1:
			svcName = host // a service of the pod's own namespace
		case len(labels) >= 3 && labels[len(labels)-1] == "svc":
			if svcNS := labels[len(labels)-2]; svcNS != ns {
				if o.namespaces[svcNS] != nil || svcNS == "cep" {
					t.Errorf("%s %q names namespace %s, the cluster runs in %s", what, hostport, svcNS, ns)
				}
				return // a service of another namespace (an existing NATS)
			}
			svcName = labels[len(labels)-3]
		default:
			return // outside the cluster
		}
		svc := o.services[svcName]
		if svc == nil {
			t.Errorf("%s %q: no service %s in %s", what, hostport, svcName, ns)
			return
		}
		if p, _ := strconv.Atoi(port); int32(p) != servicePort(t, svc, portName) {
			t.Errorf("%s %q: port %s, the service's %s is %d", what, hostport, port, portName, servicePort(t, svc, portName))
		}
		if len(labels) == 4 { // a pod of the headless service
			if svc != headless {
				t.Errorf("%s %q: pod of %s, not of the statefulset's service", what, hostport, svcName)
			}
			ord, ok := strings.CutPrefix(labels[0], sts.Name+"-")
			if i, err := strconv.Atoi(ord); !ok || err != nil || int32(i) >= replicas {
				t.Errorf("%s %q: not a pod of the %d of statefulset %s", what, hostport, replicas, sts.Name)
			}
		}
	}
	c := container(t, sts, "cepnode")
	for _, pod := range []string{"cepnode-0", fmt.Sprintf("cepnode-%d", replicas-1)} {
		env := expandEnv(t, c, map[string]string{"metadata.name": pod, "metadata.namespace": ns, "status.podIP": "10.1.2.3"})
		if env["CEPNODE_ID"] != pod {
			t.Errorf("CEPNODE_ID %q on pod %s", env["CEPNODE_ID"], pod)
		}
		peers, err := parsePeers(env["CEPNODE_PEERS"])
		if err != nil || len(peers) != 3 {
			t.Fatalf("CEPNODE_PEERS %q: %v", env["CEPNODE_PEERS"], err)
		}
		for _, p := range peers {
			resolvable("peer "+p.ID+" raft", p.RaftAddr, "raft")
			resolvable("peer "+p.ID+" api", p.APIAddr, "api")
			if host, _, _ := net.SplitHostPort(p.RaftAddr); !strings.HasPrefix(host, p.ID+".") {
				t.Errorf("peer %s has the raft address of another pod: %s", p.ID, p.RaftAddr)
			}
		}
		for _, j := range strings.Split(env["CEPNODE_JOIN"], ",") {
			resolvable("join", j, "gossip-tcp")
		}
		u := env["CEPNODE_NATS"]
		hostport, ok := strings.CutPrefix(u, "nats://")
		if !ok {
			t.Errorf("CEPNODE_NATS %q", u)
		}
		resolvable("nats", hostport, "client")
		for k, v := range env {
			if strings.Contains(v, "$(") {
				t.Errorf("%s=%q: a variable the kubelet does not expand (declared after it, or not at all)", k, v)
			}
		}
		checkMemLimit(t, c, env)
	}

	for _, s := range o.statefulSets {
		spec := s.Spec.Template.Spec
		// no Kubernetes API token in any pod
		sa := spec.ServiceAccountName
		mounts := spec.AutomountServiceAccountToken
		if mounts == nil {
			if acc := o.serviceAccounts[sa]; acc != nil {
				mounts = acc.AutomountServiceAccountToken
			}
		}
		if mounts == nil || *mounts {
			t.Errorf("statefulset %s mounts the service account token of %q", s.Name, sa)
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if !pinned(c.Image) {
				t.Errorf("statefulset %s container %s: image %q is not pinned by tag or digest", s.Name, c.Name, c.Image)
			}
		}
	}
	spec := sts.Spec.Template.Spec
	if spec.ServiceAccountName == "" || o.serviceAccounts[spec.ServiceAccountName] == nil {
		t.Errorf("cepnode runs as service account %q, not one of its own", spec.ServiceAccountName)
	} else if a := o.serviceAccounts[spec.ServiceAccountName].AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("service account %s mounts its token", spec.ServiceAccountName)
	}
	spread := map[string]bool{}
	for _, c := range spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || sel.Empty() || !selects(c.LabelSelector, podLabels) {
			t.Errorf("spread over %s selects %v, not the cepnode pods", c.TopologyKey, c.LabelSelector)
		}
		if c.MaxSkew != 1 {
			t.Errorf("spread over %s: max skew %d", c.TopologyKey, c.MaxSkew)
		}
		spread[c.TopologyKey] = true
	}
	if !spread[corev1.LabelTopologyZone] || !spread[corev1.LabelHostname] {
		t.Errorf("pods spread over %v, want zones and hosts", keys(spread))
	}
	if pdb := o.pdbs["cepnode"]; pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || !selects(pdb.Spec.Selector, podLabels) {
		t.Errorf("no disruption budget of one cepnode pod: %+v", pdb)
	}
}

// checkMemLimit: the Go runtime's soft limit is below the container's.
func checkMemLimit(t *testing.T, c corev1.Container, env map[string]string) {
	t.Helper()
	limit := c.Resources.Limits[corev1.ResourceMemory]
	soft, err := resource.ParseQuantity(strings.TrimSuffix(env["GOMEMLIMIT"], "B"))
	if err != nil || limit.IsZero() || soft.Cmp(limit) >= 0 || soft.Value() < limit.Value()*8/10 {
		t.Errorf("GOMEMLIMIT %q against a memory limit of %s: want 80-100%% of it", env["GOMEMLIMIT"], limit.String())
	}
}

func selects(s *metav1.LabelSelector, labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return len(s.MatchLabels) > 0
}

// pinned: a tag that is not latest, or a digest.
func pinned(image string) bool {
	if _, digest, ok := strings.Cut(image, "@sha256:"); ok {
		return regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(digest)
	}
	i := strings.LastIndexByte(image, ':')
	return i > strings.LastIndexByte(image, '/') && image[i+1:] != "latest" && image[i+1:] != ""
}

func metaOf[T metav1.Object](m map[string]T) map[string]metav1.Object {
	out := map[string]metav1.Object{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The base's files, read one by one as `kubectl apply -f` does, and as
// kustomize renders them, make a three-node cluster in cep.
func TestManifestBase(t *testing.T) {
	files := readFiles(t, "namespace.yaml", "nats.yaml", "cepnode.yaml")
	checkCluster(t, files, "cep", 3)
	checkCluster(t, render(t, baseDir), "cep", 3)
}

// An overlay that only sets another namespace moves the whole cluster:
// the names the nodes dial follow it (the manifests hard-coding cep, or
// cluster.local, fail here).
func TestManifestOtherNamespace(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, abs) // kustomize takes no absolute path
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: team-a\nresources:\n  - %s\n", base)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	o := render(t, dir)
	checkCluster(t, o, "team-a", 3)
	if o.services["nats"] == nil {
		t.Fatal("the base's NATS is not rendered")
	}
}

// The production example: its namespace, five nodes, the image of its
// registry, its resources and storage, and the existing NATS with its
// credentials instead of the development one.
func TestManifestProductionOverlay(t *testing.T) {
	o := render(t, filepath.Join(k8sDir, "overlays", "production"))
	checkCluster(t, o, "cep-prod", 5)
	if o.statefulSets["nats"] != nil || o.services["nats"] != nil {
		t.Error("the development NATS is still there")
	}
	sts := o.statefulSets["cepnode"]
	c := container(t, sts, "cepnode")
	if c.Image != "registry.example.com/cep/cepnode:v0.1.0" {
		t.Errorf("image %q", c.Image)
	}
	if m := c.Resources.Limits[corev1.ResourceMemory]; m.Cmp(resource.MustParse("8Gi")) != 0 {
		t.Errorf("memory limit %s", m.String())
	}
	env := expandEnv(t, c, map[string]string{"metadata.name": "cepnode-4", "metadata.namespace": "cep-prod", "status.podIP": "10.1.2.3"})
	creds := env["CEPNODE_NATS_CREDS"]
	mounted := false
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(creds, m.MountPath+"/") {
			for _, v := range sts.Spec.Template.Spec.Volumes {
				mounted = mounted || v.Name == m.Name && v.Secret != nil && v.Secret.SecretName != ""
			}
		}
	}
	if creds == "" || !mounted {
		t.Errorf("CEPNODE_NATS_CREDS %q is not in a mounted Secret", creds)
	}
	if got := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("100Gi")) != 0 {
		t.Errorf("data volumes of %s", got.String())
	}
	// every variable the overlay sets is one cepnode reads
	var stderr bytes.Buffer
	_ = Run(context.Background(), []string{"--help"}, &stderr)
	for k := range env {
		if strings.HasPrefix(k, "CEPNODE_") && !strings.Contains(stderr.String(), "env "+k+")") {
			t.Errorf("the overlay sets %s, which cepnode does not read", k)
		}
	}
}

// The Dockerfile cross-compiles on the builder's platform for the
// target's, with the module and build caches mounted, from the Go release
// go.mod names, and stamps the VERSION build argument into the variable
// internal/version reads: built with its flags, the binary holds the
// version (the linker ignores -X of a variable that does not exist).
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(k8sDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(b), " ") // continuation lines
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	for _, want := range []string{
		`(?m)^FROM --platform=\$BUILDPLATFORM golang:` + regexp.QuoteMeta(string(goVersion[1])) + `\S* AS build$`,
		`(?m)^ARG TARGETOS$`, `(?m)^ARG TARGETARCH$`, `(?m)^ARG VERSION`,
		`GOOS=\$TARGETOS GOARCH=\$TARGETARCH`, `CGO_ENABLED=0`,
		`--mount=type=cache,target=/go/pkg/mod`, `--mount=type=cache,target=/root/.cache/go-build`,
		`(?m)^FROM gcr.io/distroless/static\S*:nonroot$`,
		// cepctl ships beside cepnode, for kubectl exec
		`-o /out/ \./cmd/cepnode \./cmd/cepctl`,
		`(?m)^COPY --from=build /out/cepnode /out/cepctl /usr/local/bin/$`,
	} {
		if !regexp.MustCompile(want).MatchString(df) {
			t.Errorf("Dockerfile: no %s", want)
		}
	}
	m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(df)
	if m == nil || !strings.Contains(m[1], "${VERSION}") {
		t.Fatalf("Dockerfile: no -ldflags with ${VERSION}")
	}
	if testing.Short() {
		t.Skip("builds cepnode")
	}
	const v = "v0.0.0-dockerfile-test"
	out := filepath.Join(t.TempDir(), "cepnode")
	// no -trimpath: the packages built for the tests are reused, only the
	// link is new
	cmd := exec.Command("go", "build", "-ldflags="+strings.ReplaceAll(m[1], "${VERSION}", v), "-o", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build with the Dockerfile's flags: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bin, []byte(v)) {
		t.Errorf("the binary built with -ldflags %q does not hold the version %s", m[1], v)
	}
}
