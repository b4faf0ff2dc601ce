package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// manifestDir holds the Kubernetes manifests.
const manifestDir = "kubernetes"

// kinds are the types the manifests may hold, by apiVersion and kind. A
// manifest of any other kind fails the tests until its type is added here.
var kinds = map[string]func() any{
	"apps/v1 StatefulSet":           func() any { return new(appsv1.StatefulSet) },
	"apps/v1 Deployment":            func() any { return new(appsv1.Deployment) },
	"v1 Service":                    func() any { return new(corev1.Service) },
	"v1 ConfigMap":                  func() any { return new(corev1.ConfigMap) },
	"policy/v1 PodDisruptionBudget": func() any { return new(policyv1.PodDisruptionBudget) },
}

// manifest is one object of a manifest file, decoded into its type.
type manifest struct {
	where string // file and document index, for messages
	obj   any
}

// decodeStrict decodes one YAML document into the type its apiVersion and
// kind name, as the API server would: field names are case-sensitive, and
// an unknown or duplicate field is an error.
func decodeStrict(doc []byte, into func(typeMeta metav1.TypeMeta) (any, error)) (any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, err
	}
	obj, err := into(tm)
	if err != nil {
		return nil, err
	}
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	return obj, nil
}

// decodeManifest decodes an object of one of kinds.
func decodeManifest(doc []byte) (any, error) {
	return decodeStrict(doc, func(tm metav1.TypeMeta) (any, error) {
		newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("apiVersion %q kind %q: not a kind the manifests' tests know", tm.APIVersion, tm.Kind)
		}
		return newObj(), nil
	})
}

// documents splits a YAML stream into its documents, leaving out those
// that hold nothing but comments.
func documents(r io.Reader) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			docs = append(docs, doc)
		}
	}
}

// manifestFiles are the YAML files of manifestDir but the kustomization.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	require.NoError(t, err)
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	require.NotEmpty(t, files)
	return files
}

// loadManifests decodes every object of every manifest file.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	for _, file := range manifestFiles(t) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		docs, err := documents(bytes.NewReader(data))
		require.NoError(t, err, file)
		require.NotEmpty(t, docs, "%s holds no object", file)
		for i, doc := range docs {
			where := fmt.Sprintf("%s, document %d", file, i+1)
			obj, err := decodeManifest(doc)
			require.NoError(t, err, where)
			out = append(out, manifest{where: where, obj: obj})
		}
	}
	return out
}

// workload is a StatefulSet or a Deployment: what runs pods.
type workload struct {
	kind, name  string
	replicas    int32
	serviceName string // a StatefulSet's governing Service
	selector    *metav1.LabelSelector
	template    corev1.PodTemplateSpec
}

// cluster is everything the manifests create, by kind.
type cluster struct {
	workloads []workload
	services  []*corev1.Service
	budgets   []*policyv1.PodDisruptionBudget
	configs   []*corev1.ConfigMap
}

func loadCluster(t *testing.T) cluster {
	t.Helper()
	var c cluster
	for _, m := range loadManifests(t) {
		switch o := m.obj.(type) {
		case *appsv1.StatefulSet:
			c.workloads = append(c.workloads, workload{kind: "StatefulSet", name: o.Name, replicas: replicas(o.Spec.Replicas),
				serviceName: o.Spec.ServiceName, selector: o.Spec.Selector, template: o.Spec.Template})
		case *appsv1.Deployment:
			c.workloads = append(c.workloads, workload{kind: "Deployment", name: o.Name, replicas: replicas(o.Spec.Replicas),
				selector: o.Spec.Selector, template: o.Spec.Template})
		case *corev1.Service:
			c.services = append(c.services, o)
		case *policyv1.PodDisruptionBudget:
			c.budgets = append(c.budgets, o)
		case *corev1.ConfigMap:
			c.configs = append(c.configs, o)
		}
	}
	return c
}

// replicas is a workload's replica count, 1 when unset as in the API.
func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// siloImage is the repository name of the image deploy/Dockerfile builds:
// containers running it are silos.
const siloImage = "granary"

// imageName is an image reference's last path element without its tag
// or digest: "registry.example/team/granary:v1" is "granary".
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		ref = ref[i+1:]
	}
	ref, _, _ = strings.Cut(ref, ":")
	return ref
}

// silo is the one workload whose pods run the silo, and its container.
func (c cluster) silo(t *testing.T) (workload, corev1.Container) {
	t.Helper()
	var found []string
	var w workload
	var ctr corev1.Container
	for _, wl := range c.workloads {
		for _, container := range wl.template.Spec.Containers {
			if imageName(container.Image) == siloImage {
				found = append(found, wl.kind+" "+wl.name+" container "+container.Name)
				w, ctr = wl, container
			}
		}
	}
	require.Len(t, found, 1, "one container runs the silo image %q: %v", siloImage, found)
	require.Equal(t, "StatefulSet", w.kind, "the silos have stable names: a StatefulSet runs them")
	return w, ctr
}

// selects reports whether a selector picks the pods of a template.
func selects(t *testing.T, sel map[string]string, w workload) bool {
	t.Helper()
	if len(sel) == 0 {
		return false
	}
	return labels.SelectorFromSet(sel).Matches(labels.Set(w.template.Labels))
}

// labelSelects reports whether a label selector picks the pods of a
// template.
func labelSelects(t *testing.T, sel *metav1.LabelSelector, w workload) bool {
	t.Helper()
	require.NotNil(t, sel)
	s, err := metav1.LabelSelectorAsSelector(sel)
	require.NoError(t, err)
	return !s.Empty() && s.Matches(labels.Set(w.template.Labels))
}

// containerPort finds a container's port by name, or by number when the
// reference is a number.
func containerPort(c corev1.Container, name string, number int32) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if (name != "" && p.Name == name) || (name == "" && p.ContainerPort == number) {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// secretRefs are the Secrets and keys a pod template reads: from
// environment variables and from volumes (whose keys are the files the
// containers open, named by the *-file settings).
func secretRefs(spec corev1.PodSpec) map[string][]string {
	refs := map[string][]string{}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				refs[e.ValueFrom.SecretKeyRef.Name] = append(refs[e.ValueFrom.SecretKeyRef.Name], e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			if _, ok := refs[v.Secret.SecretName]; !ok {
				refs[v.Secret.SecretName] = nil
			}
		}
	}
	return refs
}

// validNames reports the problems of an object's name and labels.
func validNames(meta metav1.Object) []string {
	var problems []string
	problems = append(problems, validation.IsDNS1035Label(meta.GetName())...)
	for k, v := range meta.GetLabels() {
		problems = append(problems, validation.IsQualifiedName(k)...)
		problems = append(problems, validation.IsValidLabelValue(v)...)
	}
	return problems
}

// The decoder refuses what the API server would: a misspelt field, a
// field in the wrong case, a field given twice, a kind it does not know.
func TestDecoderRefusesWhatTheAPIServerWould(t *testing.T) {
	good := "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: None}\n"
	_, err := decodeManifest([]byte(good))
	require.NoError(t, err)
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIPs: [None], headless: true}\n",
		"wrong case":      "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIp: None}\n",
		"duplicate field": "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: None, clusterIP: None}\n",
		"unknown kind":    "apiVersion: v1\nkind: Frobnicator\nmetadata: {name: s}\n",
		"wrong type":      "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {replicas: three}\n",
	} {
		_, err := decodeManifest([]byte(doc))
		assert.Error(t, err, name)
	}
}

// Every manifest decodes into its type with unknown fields refused, and
// names its objects, labels and ports as the API server requires.
func TestManifestsDecodeIntoTheirTypes(t *testing.T) {
	ms := loadManifests(t)
	names := map[string]string{}
	for _, m := range ms {
		meta := objectMeta(m.obj)
		assert.Empty(t, validNames(meta), m.where)
		key := fmt.Sprintf("%T %s", m.obj, meta.GetName())
		prev, dup := names[key]
		assert.False(t, dup, "%s: %s is also in %s", m.where, key, prev)
		names[key] = m.where
	}
	c := loadCluster(t)
	require.NotEmpty(t, c.workloads)
	for _, w := range c.workloads {
		assert.True(t, labelSelects(t, w.selector, w), "%s %s: its selector picks its own pods", w.kind, w.name)
		seen := map[string]bool{}
		for _, ctr := range w.template.Spec.Containers {
			for _, p := range ctr.Ports {
				assert.Empty(t, validation.IsValidPortName(p.Name), "%s %s: port %q", w.kind, w.name, p.Name)
				assert.False(t, seen[p.Name], "%s %s: port name %q is unique in the pod", w.kind, w.name, p.Name)
				seen[p.Name] = true
			}
		}
	}
	for _, svc := range c.services {
		for _, p := range svc.Spec.Ports {
			assert.Empty(t, validation.IsValidPortName(p.Name), "Service %s: port %q", svc.Name, p.Name)
		}
	}
}

// objectMeta is a decoded object's metadata.
func objectMeta(obj any) metav1.Object {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
}

// kustomization is the part of kustomization.yaml these manifests use;
// anything else in it is refused, so that the test sees all of it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// kubectl apply -k applies every manifest: the kustomization lists each
// file of the directory once, and nothing else.
func TestKustomizationListsEveryManifest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	require.NoError(t, err)
	obj, err := decodeStrict(data, func(tm metav1.TypeMeta) (any, error) {
		if tm.APIVersion != "kustomize.config.k8s.io/v1beta1" || tm.Kind != "Kustomization" {
			return nil, fmt.Errorf("%s %s: not a kustomization", tm.APIVersion, tm.Kind)
		}
		return new(kustomization), nil
	})
	require.NoError(t, err)
	var files []string
	for _, f := range manifestFiles(t) {
		files = append(files, filepath.Base(f))
	}
	assert.ElementsMatch(t, files, obj.(*kustomization).Resources)
}

// Every Service and budget picks the pods of one workload, and every
// Service port reaches a named container port of those pods, with its
// protocol and its number (so that an address means the same through the
// Service as on the pod). The silos have a Service for their gateways and
// HTTP ports, and a budget that lets one go at a time.
func TestServicesAndBudgetsPickTheirPods(t *testing.T) {
	c, silo, _, s := settingsOfTheSilo(t)
	require.NotEmpty(t, c.services)
	exposed := map[string]bool{} // flags whose ports a Service of the silos serves
	for _, svc := range c.services {
		var picked []workload
		for _, w := range c.workloads {
			if selects(t, svc.Spec.Selector, w) {
				picked = append(picked, w)
			}
		}
		require.Len(t, picked, 1, "Service %s selects the pods of one workload", svc.Name)
		w := picked[0]
		require.NotEmpty(t, svc.Spec.Ports, "Service %s", svc.Name)
		for _, p := range svc.Spec.Ports {
			require.NotEmpty(t, p.TargetPort.StrVal, "Service %s port %s targets a container port by name", svc.Name, p.Name)
			var found *corev1.ContainerPort
			for _, ctr := range w.template.Spec.Containers {
				if cp, ok := containerPort(ctr, p.TargetPort.StrVal, 0); ok {
					found = &cp
				}
			}
			require.NotNil(t, found, "Service %s port %s: %s %s has a container port %q", svc.Name, p.Name, w.kind, w.name, p.TargetPort.StrVal)
			assert.Equal(t, orTCP(found.Protocol), orTCP(p.Protocol), "Service %s port %s", svc.Name, p.Name)
			assert.Equal(t, found.ContainerPort, p.Port, "Service %s port %s", svc.Name, p.Name)
			if w.name == silo.name && svc.Spec.ClusterIP != corev1.ClusterIPNone {
				if name, ok := flagOfPort(s, *found); ok {
					exposed[name] = true
				}
			}
		}
	}
	assert.True(t, exposed["gateway"] && exposed["http"], "a Service of the silos serves their gateway and HTTP ports: %v", exposed)

	var budgets int
	for _, b := range c.budgets {
		if labelSelects(t, b.Spec.Selector, silo) {
			budgets++
			require.NotNil(t, b.Spec.MaxUnavailable, "PodDisruptionBudget %s", b.Name)
			assert.Equal(t, "1", b.Spec.MaxUnavailable.String(), "PodDisruptionBudget %s lets one silo go at a time", b.Name)
		}
	}
	assert.Equal(t, 1, budgets, "one PodDisruptionBudget picks the silos")
}

// orTCP is a protocol, TCP when unset as in the API.
func orTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// Every container runs as a user that is not root, on a read-only root
// file system, with no capability and no way to gain one, asks for the
// CPU and memory it needs and has a memory limit; no pod gets an API
// token it has no use for.
func TestEveryContainerIsLockedDown(t *testing.T) {
	for _, w := range loadCluster(t).workloads {
		spec := w.template.Spec
		where := w.kind + " " + w.name
		pod := spec.SecurityContext
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		assert.False(t, spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken, "%s: no service account token", where)
		if assert.NotNil(t, pod.SeccompProfile, where) {
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SeccompProfile.Type, where)
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			where := where + " container " + c.Name
			sc := c.SecurityContext
			require.NotNil(t, sc, where)
			nonRoot, user := pod.RunAsNonRoot, pod.RunAsUser
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
			if sc.RunAsUser != nil {
				user = sc.RunAsUser
			}
			assert.True(t, nonRoot != nil && *nonRoot, "%s: runAsNonRoot", where)
			assert.True(t, user != nil && *user != 0, "%s: a user id that is not root", where)
			assert.True(t, sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem, "%s: readOnlyRootFilesystem", where)
			assert.True(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation false", where)
			assert.False(t, sc.Privileged != nil && *sc.Privileged, "%s: not privileged", where)
			if assert.NotNil(t, sc.Capabilities, where) {
				assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s: drops every capability", where)
				assert.Empty(t, sc.Capabilities.Add, "%s: adds none", where)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				q, ok := c.Resources.Requests[r]
				assert.True(t, ok && !q.IsZero(), "%s: requests %s", where, r)
			}
			q, ok := c.Resources.Limits[corev1.ResourceMemory]
			assert.True(t, ok && !q.IsZero(), "%s: a memory limit", where)
		}
	}
}

// kubernetesDoc walks through the manifests.
const kubernetesDoc = "../docs/kubernetes.md"

// docs/kubernetes.md creates every Secret the manifests read, with every
// key they read: those of environment variables, and the files the
// silo's settings name in Secret volumes.
func TestDocsCreateEverySecretTheManifestsRead(t *testing.T) {
	doc, err := os.ReadFile(kubernetesDoc)
	require.NoError(t, err)
	c, silo, ctr, s := settingsOfTheSilo(t)
	refs := map[string][]string{}
	for _, w := range c.workloads {
		for name, keys := range secretRefs(w.template.Spec) {
			refs[name] = append(refs[name], keys...)
		}
	}
	for _, name := range fileSettings(s) {
		secret, key, ok := secretFile(silo.template.Spec, ctr, s.value[name])
		if ok {
			refs[secret] = append(refs[secret], key)
		}
	}
	require.NotEmpty(t, refs)
	for secret, keys := range refs {
		cmd := createSecretCommand(string(doc), secret)
		require.NotEmpty(t, cmd, "%s has `kubectl create secret generic %s`", kubernetesDoc, secret)
		for _, key := range keys {
			assert.True(t, strings.Contains(cmd, "--from-literal="+key+"=") || strings.Contains(cmd, "--from-file="+key+"="),
				"%s: the command creating %s gives its key %s:\n%s", kubernetesDoc, secret, key, cmd)
		}
	}
}

// configFile is the content of a file of a ConfigMap volume, if the file
// is one and the ConfigMap is in the manifests.
func (c cluster) configFile(spec corev1.PodSpec, ctr corev1.Container, file string) ([]byte, bool) {
	mount, ok := mountOf(ctr, file)
	if !ok {
		return nil, false
	}
	rel := strings.TrimPrefix(file, strings.TrimSuffix(mount.MountPath, "/")+"/")
	for _, v := range spec.Volumes {
		if v.Name != mount.Name || v.ConfigMap == nil {
			continue
		}
		key := rel
		for _, item := range v.ConfigMap.Items {
			if item.Path == rel {
				key = item.Key
			}
		}
		for _, cm := range c.configs {
			if cm.Name == v.ConfigMap.Name {
				data, ok := cm.Data[key]
				return []byte(data), ok
			}
		}
	}
	return nil, false
}

// secretFile finds the Secret and key a file of a Secret volume comes
// from.
func secretFile(spec corev1.PodSpec, c corev1.Container, file string) (secret, key string, ok bool) {
	mount, ok := mountOf(c, file)
	if !ok {
		return "", "", false
	}
	rel := strings.TrimPrefix(file, strings.TrimSuffix(mount.MountPath, "/")+"/")
	for _, v := range spec.Volumes {
		if v.Name != mount.Name || v.Secret == nil {
			continue
		}
		if len(v.Secret.Items) == 0 {
			return v.Secret.SecretName, rel, true
		}
		for _, item := range v.Secret.Items {
			if item.Path == rel {
				return v.Secret.SecretName, item.Key, true
			}
		}
	}
	return "", "", false
}

// createSecretCommand is the shell command of doc that creates a Secret,
// its continuation lines included, or "".
func createSecretCommand(doc, secret string) string {
	start := strings.Index(doc, "kubectl create secret generic "+secret+" ")
	if start < 0 {
		return ""
	}
	var cmd strings.Builder
	for _, line := range strings.SplitAfter(doc[start:], "\n") {
		cmd.WriteString(line)
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), "\\") {
			break
		}
	}
	return cmd.String()
}

// docs/kubernetes.md names every variable of the silo's container.
func TestDocsNameEveryVariableOfTheSilo(t *testing.T) {
	doc, err := os.ReadFile(kubernetesDoc)
	require.NoError(t, err)
	_, ctr := loadCluster(t).silo(t)
	require.NotEmpty(t, ctr.Env)
	for _, e := range ctr.Env {
		assert.True(t, strings.Contains(string(doc), "`"+e.Name+"`"), "%s names the silo's variable %s", kubernetesDoc, e.Name)
	}
}
