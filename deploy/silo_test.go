package deploy

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// samplePodIP stands for status.podIP when the tests work out what a
// silo's settings are in a pod.
const samplePodIP = "10.1.2.3"

// siloSettings are the settings of the silo's container as the binary
// would see them in a pod: its flags set by its arguments, else by the
// container's environment, else by the config file of the manifests'
// ConfigMap, else at the binary's defaults, the binary's own precedence.
type siloSettings struct {
	flags  binaryFlags
	value  map[string]string // flag name -> value
	set    map[string]string // flag name -> what set it, for those the manifests set
	config []byte            // the config file the silo reads, if from a ConfigMap
}

// fieldValue stands for what the downward API gives a pod.
func fieldValue(podName, fieldPath string) (string, error) {
	switch fieldPath {
	case "metadata.name":
		return podName, nil
	case "metadata.namespace":
		return "default", nil
	case "status.podIP":
		return samplePodIP, nil
	case "status.hostIP":
		return "10.0.0.1", nil
	case "spec.nodeName":
		return "node-1", nil
	}
	return "", fmt.Errorf("fieldRef %q: not one the tests stand in for", fieldPath)
}

// expand replaces $(NAME) with the value of a variable defined before, as
// the kubelet does ($$ is a literal $). A reference to a variable not
// defined before is an error: the kubelet would leave it as it is.
func expand(s string, defined map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "$("):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return "", fmt.Errorf("%q: unterminated $(", s)
			}
			name := s[i+2 : i+end]
			v, ok := defined[name]
			if !ok {
				return "", fmt.Errorf("%q: $(%s) is not a variable defined before it", s, name)
			}
			b.WriteString(v)
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// resolveSettings works out the silo container's settings in the first
// pod of its workload, reporting every variable or argument the binary
// does not know.
func resolveSettings(t *testing.T, cl cluster, w workload, c corev1.Container, flags binaryFlags) siloSettings {
	t.Helper()
	s := siloSettings{flags: flags, value: map[string]string{}, set: map[string]string{}}
	for name, f := range flags.byName {
		s.value[name] = f.def
	}
	podName := w.name + "-0"
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch from := e.ValueFrom; {
		case from == nil:
			var err error
			v, err = expand(e.Value, env)
			require.NoError(t, err, "env %s", e.Name)
		case from.FieldRef != nil:
			var err error
			v, err = fieldValue(podName, from.FieldRef.FieldPath)
			require.NoError(t, err, "env %s", e.Name)
		case from.SecretKeyRef != nil:
			v = "secret " + from.SecretKeyRef.Name + "/" + from.SecretKeyRef.Key
		case from.ConfigMapKeyRef != nil:
			v = "configmap " + from.ConfigMapKeyRef.Name + "/" + from.ConfigMapKeyRef.Key
		case from.ResourceFieldRef != nil:
			v = "resource " + from.ResourceFieldRef.Resource
		}
		env[e.Name] = v
		if strings.HasPrefix(e.Name, "GRANARY_") {
			f, ok := flags.byEnv[e.Name]
			if assert.True(t, ok, "env %s is not the variable of a flag of the binary", e.Name) {
				s.value[f.name], s.set[f.name] = v, "env "+e.Name
			}
		}
	}
	if len(c.Command) > 0 {
		require.Equal(t, "/granary", c.Command[0], "the image's binary")
	}
	var args []string
	for _, a := range append(slices.Clone(c.Command[min(1, len(c.Command)):]), c.Args...) {
		v, err := expand(a, env)
		require.NoError(t, err, "args")
		args = append(args, v)
	}
	fs := flag.NewFlagSet("granary", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for name, f := range flags.byName {
		if f.typ == "" {
			fs.Bool(name, false, "")
		} else {
			fs.String(name, "", "")
		}
	}
	require.NoError(t, fs.Parse(args), "the container's arguments are flags of the binary: %q", args)
	require.Empty(t, fs.Args(), "the binary takes no arguments but flags")
	fs.Visit(func(f *flag.Flag) { s.value[f.Name], s.set[f.Name] = f.Value.String(), "argument -"+f.Name })

	if file := s.value["config"]; file != "" {
		data, ok := cl.configFile(w.template.Spec, c, file)
		if !ok {
			return s
		}
		s.config = data
		var cfg struct {
			Silo map[string]any `json:"silo"`
		}
		require.NoError(t, yaml.Unmarshal(data, &cfg), "the config file %s", file)
		for name, v := range cfg.Silo {
			_, ok := flags.byName[name]
			require.True(t, ok, "the config file %s: silo.%s is not a flag of the binary", file, name)
			if _, ok := s.set[name]; ok {
				continue
			}
			value := fmt.Sprint(v)
			if list, ok := v.([]any); ok {
				var items []string
				for _, item := range list {
					items = append(items, fmt.Sprint(item))
				}
				value = strings.Join(items, ",")
			}
			s.value[name], s.set[name] = value, "config file silo."+name
		}
	}
	return s
}

// settingsOfTheSilo loads the manifests and works out the silo's settings.
func settingsOfTheSilo(t *testing.T) (cluster, workload, corev1.Container, siloSettings) {
	t.Helper()
	_, flags := builtBinary(t)
	c := loadCluster(t)
	w, ctr := c.silo(t)
	return c, w, ctr, resolveSettings(t, c, w, ctr, flags)
}

// hostPort splits a listening address; ok is false for anything else.
func hostPort(addr string) (host string, port int32, ok bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return host, int32(n), true
}

// reachable reports whether an address bound in the pod is reachable from
// outside it: every interface, or the pod's IP.
func reachable(host string) bool {
	return host == "" || host == samplePodIP || net.ParseIP(host).IsUnspecified()
}

// flagOfPort is the flag a container port is named after: its name, or
// its name less "-udp" or "-tcp" for the second protocol of one flag.
func flagOfPort(s siloSettings, p corev1.ContainerPort) (string, bool) {
	if _, ok := s.flags.byName[p.Name]; ok {
		return p.Name, true
	}
	name := strings.TrimSuffix(p.Name, "-"+strings.ToLower(string(p.Protocol)))
	_, ok := s.flags.byName[name]
	return name, ok
}

// fileSettings are the settings that name a file: -config and the
// -*-file ones.
func fileSettings(s siloSettings) []string {
	var names []string
	for name := range s.set {
		if name == "config" || strings.HasSuffix(name, "-file") {
			names = append(names, name)
		}
	}
	return names
}

// Every setting the silo's manifest gives is a flag of the binary: the
// resolution fails on any other GRANARY_ variable, argument or key of the
// config file's silo section, and on a $(VAR) the kubelet could not
// expand; the kubelet adds no variables of its own. The files the
// settings name are in volumes the container mounts.
func TestSiloSetsOnlyFlagsOfTheBinary(t *testing.T) {
	_, w, ctr, s := settingsOfTheSilo(t)
	require.NotEmpty(t, s.set, "the manifest sets the silo's flags")
	// Service links would give the pod GRANARY_SERVICE_HOST, GRANARY_PORT
	// and the like for the Services named granary, variables of the
	// binary's own prefix that no manifest shows.
	links := w.template.Spec.EnableServiceLinks
	assert.True(t, links != nil && !*links, "enableServiceLinks is false for the silos")
	for _, name := range fileSettings(s) {
		file := s.value[name]
		require.True(t, path.IsAbs(file), "-%s %q is an absolute path", name, file)
		mount, ok := mountOf(ctr, file)
		require.True(t, ok, "-%s %q is in a volume the container mounts", name, file)
		assert.True(t, mount.ReadOnly, "-%s: the volume at %s is mounted read-only", name, mount.MountPath)
		assert.True(t, slices.ContainsFunc(w.template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name }),
			"the pod has the volume %s", mount.Name)
	}
}

// mountOf finds the volume mount holding a file.
func mountOf(c corev1.Container, file string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

// Every container port is named after the flag that binds it and has
// that flag's port; every address the silo binds where others can reach
// it has a container port; gossip (memberlist) is open for TCP and UDP.
func TestSiloContainerPortsAreItsFlagsPorts(t *testing.T) {
	_, _, ctr, s := settingsOfTheSilo(t)
	require.NotEmpty(t, ctr.Ports)
	byNumber := map[int32][]corev1.Protocol{}
	for _, p := range ctr.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		byNumber[p.ContainerPort] = append(byNumber[p.ContainerPort], proto)
		name, ok := flagOfPort(s, p)
		if !assert.True(t, ok, "container port %q is named after a flag of the binary", p.Name) {
			continue
		}
		_, port, ok := hostPort(s.value[name])
		if assert.True(t, ok, "-%s %q is host:port", name, s.value[name]) {
			assert.Equal(t, port, p.ContainerPort, "container port %q is the port of -%s %q", p.Name, name, s.value[name])
		}
	}
	bound := 0
	for name, v := range s.value {
		host, port, ok := hostPort(v)
		if !ok || !reachable(host) {
			continue
		}
		bound++
		assert.Contains(t, byNumber, port, "-%s %q binds where others reach it: a container port has its number", name, v)
	}
	require.NotZero(t, bound, "the silo binds addresses the other pods reach")
	_, gossip, ok := hostPort(s.value["gossip"])
	require.True(t, ok, "-gossip %q", s.value["gossip"])
	assert.ElementsMatch(t, []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}, byNumber[gossip],
		"gossip port %d takes TCP and UDP", gossip)
}

// The seeds are every pod's stable DNS name under the StatefulSet's
// headless Service, the silo's own included, at the gossip port, and
// may add the Service's SRV name for the gossip port; the Service lists
// pods before they are ready, since a silo is found by the others while
// it joins.
func TestSiloSeedsAreEveryPodOfTheStatefulSet(t *testing.T) {
	c, w, ctr, s := settingsOfTheSilo(t)
	_, gossip, ok := hostPort(s.value["gossip"])
	require.True(t, ok, "-gossip %q", s.value["gossip"])
	require.Contains(t, s.set, "seeds", "the manifest gives the seeds")
	i := slices.IndexFunc(c.services, func(svc *corev1.Service) bool { return svc.Name == w.serviceName })
	require.GreaterOrEqual(t, i, 0, "the StatefulSet's Service %s is in the manifests", w.serviceName)
	svc := c.services[i]
	var ordinals []int
	for _, seed := range strings.Split(s.value["seeds"], ",") {
		seed = strings.TrimSpace(seed)
		if name, ok := strings.CutPrefix(seed, srvSeedPrefix); ok {
			checkSRVSeed(t, seed, name, svc, ctr, gossip)
			continue
		}
		host, port, ok := hostPort(seed)
		require.True(t, ok, "seed %q is host:port", seed)
		assert.Equal(t, gossip, port, "seed %q is at the gossip port", seed)
		pod, domain, _ := strings.Cut(host, ".")
		assert.True(t, domain == w.serviceName || strings.HasPrefix(domain, w.serviceName+"."),
			"seed %q is a name under the Service %s", seed, w.serviceName)
		n, err := strconv.Atoi(strings.TrimPrefix(pod, w.name+"-"))
		require.NoError(t, err, "seed %q names a pod of %s", seed, w.name)
		ordinals = append(ordinals, n)
	}
	var want []int
	for i := range int(w.replicas) {
		want = append(want, i)
	}
	assert.ElementsMatch(t, want, ordinals, "one seed for each of the %d pods", w.replicas)

	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "%s is headless: one DNS name per pod", svc.Name)
	assert.True(t, svc.Spec.PublishNotReadyAddresses, "%s lists pods that are not ready yet", svc.Name)
	assert.True(t, selects(t, svc.Spec.Selector, w), "%s selects the silos", svc.Name)
}

// srvSeedPrefix is the cluster package's SRVSeedPrefix; the module does
// not import the framework's.
const srvSeedPrefix = "dnssrv+"

// checkSRVSeed checks an SRV seed: the name Kubernetes gives the records
// of a named port of the headless Service (_port._protocol.service),
// whose target is the container's gossip port.
func checkSRVSeed(t *testing.T, seed, name string, svc *corev1.Service, ctr corev1.Container, gossip int32) {
	t.Helper()
	labels := strings.SplitN(name, ".", 4)
	require.GreaterOrEqual(t, len(labels), 3, "seed %q is %s_port._protocol.service", seed, srvSeedPrefix)
	portName, okPort := strings.CutPrefix(labels[0], "_")
	protocol, okProtocol := strings.CutPrefix(labels[1], "_")
	require.True(t, okPort && okProtocol, "seed %q is %s_port._protocol.service", seed, srvSeedPrefix)
	assert.Equal(t, svc.Name, labels[2], "seed %q names the headless Service", seed)
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Name == portName && strings.EqualFold(string(orTCP(p.Protocol)), protocol)
	})
	require.GreaterOrEqual(t, i, 0, "seed %q names a port of %s, with its protocol", seed, svc.Name)
	target, ok := containerPort(ctr, svc.Spec.Ports[i].TargetPort.StrVal, svc.Spec.Ports[i].TargetPort.IntVal)
	require.True(t, ok, "the port of seed %q targets a container port", seed)
	assert.Equal(t, gossip, target.ContainerPort, "seed %q gives the gossip port", seed)
}

// The probes ask the HTTP port: readiness a path that answers 200 while
// the silo serves and 503 once it was asked to stop, liveness one that
// still answers then. Both run against the built binary.
func TestSiloProbesAreServedOnItsHTTPPort(t *testing.T) {
	_, _, ctr, s := settingsOfTheSilo(t)
	probePath := func(what string, p *corev1.Probe) string {
		require.NotNil(t, p, "the silo has a %s probe", what)
		require.NotNil(t, p.HTTPGet, "the %s probe is an HTTP GET", what)
		require.Contains(t, []corev1.URIScheme{"", corev1.URISchemeHTTP}, p.HTTPGet.Scheme, "the %s probe", what)
		port, ok := containerPort(ctr, p.HTTPGet.Port.StrVal, p.HTTPGet.Port.IntVal)
		require.True(t, ok, "the %s probe's port %s is a container port", what, p.HTTPGet.Port.String())
		name, ok := flagOfPort(s, port)
		require.True(t, ok && name == "http", "the %s probe asks the port of -http, not %q", what, port.Name)
		require.True(t, strings.HasPrefix(p.HTTPGet.Path, "/"), "the %s probe's path %q", what, p.HTTPGet.Path)
		return p.HTTPGet.Path
	}
	readiness := probePath("readiness", ctr.ReadinessProbe)
	liveness := probePath("liveness", ctr.LivenessProbe)

	path, _ := builtBinary(t)
	args := []string{"-shutdown-delay", "1m", "-stop-timeout", "2m"}
	if s.config != nil { // the binary takes the manifests' config file
		file := filepath.Join(t.TempDir(), "granary.yaml")
		require.NoError(t, os.WriteFile(file, s.config, 0o600))
		args = append(args, "-config", file)
	}
	silo := startSilo(t, path, args...)
	require.Equal(t, http.StatusOK, silo.get(t, readiness), "GET %s of a silo that serves", readiness)
	require.Equal(t, http.StatusOK, silo.get(t, liveness), "GET %s of a silo that serves", liveness)
	require.Equal(t, http.StatusNotFound, silo.get(t, "/not-a-path-of-the-port"), "the port does not answer every path")

	require.NoError(t, silo.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool {
		code, err := silo.status(readiness)
		return err == nil && code == http.StatusServiceUnavailable
	},
		30*time.Second, 20*time.Millisecond, "GET %s fails once the silo is asked to stop", readiness)
	require.Equal(t, http.StatusOK, silo.get(t, liveness), "GET %s still answers during -shutdown-delay", liveness)
}

// The grace period covers the preStop sleep and the whole stop
// (-stop-timeout, which includes -shutdown-delay), and the liveness probe
// lets a stopping silo finish: the HTTP port closes -shutdown-delay into
// the stop, and the probe may fail for the rest of it.
func TestSiloGracePeriodCoversItsStop(t *testing.T) {
	_, w, ctr, s := settingsOfTheSilo(t)
	duration := func(name string) time.Duration {
		d, err := time.ParseDuration(s.value[name])
		require.NoError(t, err, "-%s %q", name, s.value[name])
		return d
	}
	stopTimeout, shutdownDelay := duration("stop-timeout"), duration("shutdown-delay")
	require.Less(t, shutdownDelay, stopTimeout, "-shutdown-delay leaves time of -stop-timeout for the stop")

	var preStop time.Duration
	if ctr.Lifecycle != nil && ctr.Lifecycle.PreStop != nil {
		require.NotNil(t, ctr.Lifecycle.PreStop.Sleep, "the preStop hook is a sleep (the image has no shell), of known length")
		preStop = time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	require.NotZero(t, preStop, "a preStop sleep lets the endpoints drop the pod before SIGTERM")

	grace := 30 * time.Second // the API's default
	if g := w.template.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	assert.GreaterOrEqual(t, grace, preStop+stopTimeout, "terminationGracePeriodSeconds covers preStop %v and -stop-timeout %v", preStop, stopTimeout)
	assert.GreaterOrEqual(t, grace, shutdownDelay+stopTimeout, "terminationGracePeriodSeconds covers -shutdown-delay %v and -stop-timeout %v", shutdownDelay, stopTimeout)

	live := ctr.LivenessProbe
	require.NotNil(t, live)
	period, failures := orDefault(live.PeriodSeconds, 10), orDefault(live.FailureThreshold, 3)
	assert.Greater(t, time.Duration(period*failures)*time.Second, stopTimeout-shutdownDelay,
		"the liveness probe (%d × %d s) does not kill a silo still stopping after its HTTP port closed", failures, period)
}

// orDefault is a probe's setting, or the API's default when it is unset.
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}
