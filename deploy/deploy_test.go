// Package deploy_test checks the deployment and operations files against the
// code they describe: docker-compose.yml, Dockerfile and .dockerignore,
// deploy/k8s, deploy/prometheus/alerts.yml, deploy/grafana/sutra.json and
// docs/runbook.md. Schema validation (Kubernetes API, compose specification)
// is scripts/validate-deploy.sh; this test checks what a schema cannot: that
// the probes, ports, grace periods, env names, metric names and runbook links
// agree with the worker. The last test scrapes a real worker and lints the
// exposition with `promtool check metrics`.
package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/metrics"
)

const root = ".."

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// --- what the worker defines -------------------------------------------------

// configVars are the SUTRA_* variables app.Config reads, with their defaults.
func configVars(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, v := range app.Variables() {
		vars[v.Name] = v.Default
	}
	if len(vars) < 10 {
		t.Fatalf("found only %d variables in app.Variables", len(vars))
	}
	return vars
}

// setting is the value of a SUTRA_* duration from env, else its default.
func durationSetting(t *testing.T, env map[string]string, name string) time.Duration {
	t.Helper()
	v, ok := env[name]
	if !ok {
		v = configVars(t)[name]
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func checkEnvNames(t *testing.T, where string, names []string) {
	t.Helper()
	vars := configVars(t)
	for _, n := range names {
		if strings.HasPrefix(n, "SUTRA_") {
			if _, ok := vars[n]; !ok {
				t.Errorf("%s sets %s, which app.Config does not read", where, n)
			}
		}
	}
}

// httpPort is the port of SUTRA_HTTP_ADDR's default.
func httpPort(t *testing.T) int {
	t.Helper()
	addr := configVars(t)["SUTRA_HTTP_ADDR"]
	p, err := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	if err != nil {
		t.Fatalf("SUTRA_HTTP_ADDR default %q: %v", addr, err)
	}
	return p
}

// apiPort is SUTRA_API_ADDR's port (the task and admin API), gatewayPort
// SUTRA_GATEWAY_ADDR's (the Zeebe gateway).
const (
	apiPort     = 8080
	gatewayPort = 26500
)

// The examples the image ships and the compose stack deploys.
func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.bpmn"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/*.bpmn: %v", err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return files
}

// --- docker-compose.yml ------------------------------------------------------

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	// Profiles is empty for the default stack; ["ha"] for the highly
	// available one (TestComposeHAProfileHasNoSinglePointOfFailure).
	Profiles        []string          `yaml:"profiles"`
	Image           string            `yaml:"image"`
	Build           any               `yaml:"build"`
	Command         []string          `yaml:"command"`
	Restart         string            `yaml:"restart"`
	Environment     map[string]string `yaml:"environment"`
	Ports           []string          `yaml:"ports"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	MemLimit        string            `yaml:"mem_limit"`
	DependsOn       map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(read(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Host ports of `make demo`, of locally installed PostgreSQL and RabbitMQ
// (AMQP, management, Erlang distribution and epmd), and the worker's own.
var reservedHostPorts = map[int]string{
	5432: "PostgreSQL", 5672: "RabbitMQ", 15672: "RabbitMQ management", 25672: "RabbitMQ distribution", 4369: "epmd",
	9464: "make demo (demo-a)", 9465: "make demo (demo-b)", 8080: "the worker API", 8081: "the worker API",
	26500: "the Zeebe gateway",
}

func TestComposeRunsAsWritten(t *testing.T) {
	c := loadCompose(t)
	pg, ok := c.Services["postgres"]
	if !ok {
		t.Fatal("no postgres service")
	}
	// The health check must use TCP: the image's init-time server listens on
	// the Unix socket only and would pass a socket check.
	if hc := pg.Healthcheck; hc == nil || !slices.Contains(hc.Test, "pg_isready") || !hasArg(hc.Test, "-h", "127.0.0.1") {
		t.Errorf("postgres health check must run pg_isready -h 127.0.0.1 (TCP), has %v", pg.Healthcheck)
	}

	var builders, deploys, workers []string
	var migrate string
	image := ""
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		checkEnvNames(t, "docker-compose.yml service "+name, sortedKeys(s.Environment))
		if len(s.Profiles) > 0 {
			continue // the ha profile: TestComposeHAProfileHasNoSinglePointOfFailure
		}
		if s.Build != nil {
			builders = append(builders, name)
			image = s.Image
		}
		if len(s.Command) > 0 {
			switch s.Command[0] {
			case "deploy":
				deploys = append(deploys, name)
			case "run":
				workers = append(workers, name)
			case "migrate":
				migrate = name
			}
		}
	}
	if len(builders) != 1 || image == "" {
		t.Fatalf("the worker image must be built once, by one service with build and image; built by %v (image %q)", builders, image)
	}
	if len(workers) < 2 || migrate == "" || len(deploys) == 0 {
		t.Fatalf("want a migrate service, deploy services and two or more workers; have migrate %q, deploys %v, workers %v", migrate, deploys, workers)
	}

	// Every service that runs the worker binary runs the one built image.
	for _, name := range append(append([]string{migrate}, deploys...), workers...) {
		if s := c.Services[name]; s.Image != image {
			t.Errorf("service %s runs image %q, want the built %q", name, s.Image, image)
		}
	}

	// Restart policies: services restart, one-shots do not.
	for _, name := range append([]string{"postgres", "rabbitmq"}, workers...) {
		if r := c.Services[name].Restart; r != "unless-stopped" && r != "always" && r != "on-failure" {
			t.Errorf("service %s has restart %q: a crash would leave it dead", name, r)
		}
	}
	for _, name := range append([]string{migrate}, deploys...) {
		if r := c.Services[name].Restart; r != "no" {
			t.Errorf("one-shot service %s has restart %q, want \"no\"", name, r)
		}
	}

	// migrate waits for a healthy database; each deploy for migrate.
	if cond := c.Services[migrate].DependsOn["postgres"].Condition; cond != "service_healthy" {
		t.Errorf("%s depends on postgres with %q, want service_healthy", migrate, cond)
	}
	deployed := map[string]string{}
	for _, name := range deploys {
		s := c.Services[name]
		if cond := s.DependsOn[migrate].Condition; cond != "service_completed_successfully" {
			t.Errorf("%s depends on %s with %q, want service_completed_successfully", name, migrate, cond)
		}
		if len(s.Command) < 2 {
			t.Errorf("%s runs %v, want deploy /examples or /examples/FILE…", name, s.Command)
			continue
		}
		for _, arg := range s.Command[1:] {
			switch {
			case arg == "/examples": // worker deploy DIR: every *.bpmn in it
				for _, ex := range examples(t) {
					deployed[ex] = name
				}
			case strings.HasPrefix(arg, "/examples/"):
				deployed[path.Base(arg)] = name
			default:
				t.Errorf("%s deploys %s, not from /examples", name, arg)
			}
		}
	}
	for _, ex := range examples(t) {
		if _, ok := deployed[ex]; !ok {
			t.Errorf("examples/%s is deployed by no service", ex)
		}
		delete(deployed, ex)
	}
	for file, svc := range deployed {
		t.Errorf("%s deploys /examples/%s, which examples/ does not have", svc, file)
	}

	// Workers: wait for every one-shot and the broker, health-checked on
	// /readyz, distinct replica ids, a stop grace above the shutdown timeout.
	ids := map[string]string{}
	for _, name := range workers {
		s := c.Services[name]
		for _, d := range append([]string{migrate}, deploys...) {
			if cond := s.DependsOn[d].Condition; cond != "service_completed_successfully" {
				t.Errorf("worker %s depends on %s with %q, want service_completed_successfully", name, d, cond)
			}
		}
		if cond := s.DependsOn["rabbitmq"].Condition; cond != "service_healthy" {
			t.Errorf("worker %s depends on rabbitmq with %q, want service_healthy", name, cond)
		}
		hc := s.Healthcheck
		if hc == nil || !slices.ContainsFunc(hc.Test, func(a string) bool {
			return a == fmt.Sprintf("http://127.0.0.1:%d/readyz", httpPort(t))
		}) {
			t.Errorf("worker %s has no health check on /readyz: %v", name, hc)
		} else if d, err := time.ParseDuration(hc.StartPeriod); err != nil || d < durationSetting(t, s.Environment, "SUTRA_LEASE_TTL") {
			t.Errorf("worker %s health check start_period %q is shorter than SUTRA_LEASE_TTL (a restart waits that long for its id)", name, hc.StartPeriod)
		}
		// Zeebe clients reach every worker whose API is published.
		for _, want := range []int{apiPort, gatewayPort} {
			if !slices.ContainsFunc(s.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+strconv.Itoa(want)) }) {
				t.Errorf("worker %s does not publish container port %d", name, want)
			}
		}
		if id := s.Environment["SUTRA_REPLICA_ID"]; id != "" {
			if other, dup := ids[id]; dup {
				t.Errorf("workers %s and %s share SUTRA_REPLICA_ID %s", other, name, id)
			}
			ids[id] = name
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if want := durationSetting(t, s.Environment, "SUTRA_SHUTDOWN_TIMEOUT") + 3*time.Second; err != nil || grace <= want {
			t.Errorf("worker %s stop_grace_period %q must exceed SUTRA_SHUTDOWN_TIMEOUT + 3s = %v", name, s.StopGracePeriod, want)
		}
		if s.Environment["SUTRA_MIGRATE"] != "false" {
			t.Errorf("worker %s migrates too; the migrate service does that once", name)
		}
	}

	// Published ports: loopback only, never a port of make demo or of local
	// services, never twice.
	used := map[int]string{}
	for _, name := range sortedKeys(c.Services) {
		for _, p := range c.Services[name].Ports {
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("service %s publishes %q: want 127.0.0.1:HOST:CONTAINER", name, p)
				continue
			}
			host, err := strconv.Atoi(parts[1])
			if err != nil {
				t.Errorf("service %s publishes %q: %v", name, p, err)
				continue
			}
			if what, clash := reservedHostPorts[host]; clash {
				t.Errorf("service %s publishes host port %d, used by %s", name, host, what)
			}
			if other, dup := used[host]; dup {
				t.Errorf("services %s and %s both publish host port %d", other, name, host)
			}
			used[host] = name
		}
	}
}

// The ha profile: three RabbitMQ nodes clustered with one cookie, a
// pg_auto_failover monitor and two nodes whose standby is synchronous, and
// workers told every node, on quorum queues, migrated and deployed by the
// profile's own one-shots. Its workers are checked like the default ones
// where the default test checks them: image, ports, ids, health check.
func TestComposeHAProfileHasNoSinglePointOfFailure(t *testing.T) {
	c := loadCompose(t)
	ha := map[string]composeService{}
	for name, s := range c.Services {
		if slices.Contains(s.Profiles, "ha") {
			ha[name] = s
		}
	}
	var brokers, nodes, workers []string
	monitor := ""
	for _, name := range sortedKeys(ha) {
		s := ha[name]
		switch {
		case strings.HasPrefix(s.Image, "rabbitmq:"):
			brokers = append(brokers, name)
			if !strings.Contains(s.Environment["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"], "cluster_nodes") || s.Environment["RABBITMQ_ERLANG_COOKIE"] == "" {
				t.Errorf("%s does not join the cluster (cluster_nodes, a shared Erlang cookie)", name)
			}
		case slices.Contains(s.Command, "monitor"):
			monitor = name
		case slices.Contains(s.Command, "pg_autoctl"):
			nodes = append(nodes, name)
			if !hasArg(s.Command, "--replication-quorum", "true") || !slices.Contains(s.Command, "--run") {
				t.Errorf("%s: %v is not a synchronous, running pg_auto_failover node", name, s.Command)
			}
		case len(s.Command) > 0 && s.Command[0] == "run":
			workers = append(workers, name)
		}
	}
	if len(brokers) != 3 || monitor == "" || len(nodes) != 2 || len(workers) < 2 {
		t.Fatalf("ha profile: brokers %v, monitor %q, nodes %v, workers %v; want 3, a monitor, 2 and at least 2", brokers, monitor, nodes, workers)
	}
	for _, name := range workers {
		env := ha[name].Environment
		for _, b := range brokers {
			if !strings.Contains(env["SUTRA_AMQP_URL"], "@"+b+":") {
				t.Errorf("worker %s: SUTRA_AMQP_URL %q does not list node %s", name, env["SUTRA_AMQP_URL"], b)
			}
			if cond := ha[name].DependsOn[b].Condition; cond != "service_healthy" {
				t.Errorf("worker %s depends on %s with %q, want service_healthy", name, b, cond)
			}
		}
		for _, n := range nodes {
			if !strings.Contains(env["SUTRA_DATABASE_URL"], n+":") {
				t.Errorf("worker %s: SUTRA_DATABASE_URL %q does not list %s", name, env["SUTRA_DATABASE_URL"], n)
			}
		}
		if env["SUTRA_QUEUE_TYPE"] != "quorum" || env["SUTRA_MIGRATE"] != "false" {
			t.Errorf("worker %s: SUTRA_QUEUE_TYPE %q, SUTRA_MIGRATE %q; want quorum and false", name, env["SUTRA_QUEUE_TYPE"], env["SUTRA_MIGRATE"])
		}
		for _, oneShot := range []string{"migrate-ha", "deploy-ha"} {
			if cond := ha[name].DependsOn[oneShot].Condition; cond != "service_completed_successfully" {
				t.Errorf("worker %s depends on %s with %q, want service_completed_successfully", name, oneShot, cond)
			}
		}
		if ha[name].Image != c.Services["migrate"].Image || ha[name].Healthcheck == nil || ha[name].StopGracePeriod == "" {
			t.Errorf("worker %s: image %q, health check %v, stop grace %q; want the worker image, a health check and a grace",
				name, ha[name].Image, ha[name].Healthcheck, ha[name].StopGracePeriod)
		}
	}
	if q := ha["migrate-ha"].Environment["SUTRA_QUEUE_TYPE"]; q != "quorum" {
		t.Errorf("migrate-ha: SUTRA_QUEUE_TYPE %q, want quorum", q)
	}
}

// hasArg reports whether args holds flag immediately followed by value.
func hasArg(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

// --- Dockerfile and .dockerignore --------------------------------------------

func TestDockerfileShipsTheWorkerAndTheExamples(t *testing.T) {
	lines := dockerfileLines(t)
	var final []string // instructions of the last stage
	for _, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			final = nil
		}
		final = append(final, l)
	}
	if len(final) == 0 || !strings.Contains(final[0], "distroless/static") {
		t.Errorf("the image should be distroless/static, is %q", final[0])
	}
	want := map[string]bool{
		"COPY --from=build /worker /worker": false,
		"COPY examples/ /examples/":         false,
		`ENTRYPOINT ["/worker"]`:            false,
	}
	var exposed []string
	for _, l := range final {
		if _, ok := want[l]; ok {
			want[l] = true
		}
		if f := strings.Fields(l); len(f) > 1 && strings.ToUpper(f[0]) == "EXPOSE" {
			exposed = append(exposed, f[1:]...)
		}
	}
	for l, found := range want {
		if !found {
			t.Errorf("the final stage lacks %q", l)
		}
	}
	for _, p := range []int{httpPort(t), apiPort, gatewayPort} {
		if !slices.Contains(exposed, strconv.Itoa(p)) {
			t.Errorf("the image does not EXPOSE %d (has %v)", p, exposed)
		}
	}
	// Whatever the compose health check runs must be in the image.
	for name, s := range loadCompose(t).Services {
		if s.Healthcheck == nil || s.Image == "" || !strings.HasPrefix(s.Image, "sutra-worker") {
			continue
		}
		bin := s.Healthcheck.Test[1]
		if !slices.ContainsFunc(final, func(l string) bool { return strings.HasPrefix(l, "COPY ") && strings.HasSuffix(l, " "+bin) }) {
			t.Errorf("service %s health check runs %s, which the image does not COPY", name, bin)
		}
	}
}

// dockerfileLines are the Dockerfile's instructions, continuation lines
// joined, comments dropped.
func dockerfileLines(t *testing.T) []string {
	t.Helper()
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(read(t, "Dockerfile")), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#") || (l == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		lines = append(lines, strings.TrimSpace(cur+l))
		cur = ""
	}
	return lines
}

// dockerignore holds .dockerignore's patterns with Docker's semantics: the
// last matching pattern wins, `!` re-includes, `**` spans directories, and a
// pattern that matches a directory matches everything below it.
type dockerignore []struct {
	re      *regexp.Regexp
	exclude bool
}

func loadDockerignore(t *testing.T) dockerignore {
	t.Helper()
	var d dockerignore
	for _, l := range strings.Split(string(read(t, ".dockerignore")), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		exclude := !strings.HasPrefix(l, "!")
		p := path.Clean(strings.TrimPrefix(strings.TrimPrefix(l, "!"), "/"))
		var b strings.Builder
		b.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch c := p[i]; {
			case c == '*' && i+1 < len(p) && p[i+1] == '*':
				i++
				if i+1 < len(p) && p[i+1] == '/' {
					i++
					b.WriteString("(.*/)?")
				} else {
					b.WriteString(".*")
				}
			case c == '*':
				b.WriteString("[^/]*")
			case c == '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		b.WriteString("$")
		d = append(d, struct {
			re      *regexp.Regexp
			exclude bool
		}{regexp.MustCompile(b.String()), exclude})
	}
	return d
}

func (d dockerignore) excluded(file string) bool {
	out := false
	for _, p := range d {
		for prefix := file; prefix != "."; prefix = path.Dir(prefix) {
			if p.re.MatchString(prefix) {
				out = p.exclude
				break
			}
		}
	}
	return out
}

func TestDockerignoreKeepsOutWhatTheBuildDoesNotRead(t *testing.T) {
	d := loadDockerignore(t)
	for _, f := range []string{".git/HEAD", "bin/worker", "worker.test", "cpu.out"} {
		if !d.excluded(f) {
			t.Errorf(".dockerignore lets %s into the build context", f)
		}
	}
	// Everything `go build ./cmd/worker` reads, and the examples, stays in.
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}{{end}}`, "./cmd/worker")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{"go.mod", "go.sum"}
	for _, ex := range examples(t) {
		inputs = append(inputs, "examples/"+ex)
	}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, filepath.ToSlash(rel))
	}
	if len(inputs) < 20 {
		t.Fatalf("only %d build inputs found: %v", len(inputs), inputs)
	}
	for _, f := range inputs {
		if d.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the image build reads", f)
		}
	}
}

// --- deploy/k8s ----------------------------------------------------------------

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
	TimeoutSeconds   int `yaml:"timeoutSeconds"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env     []envVar `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type podTemplate struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
		RestartPolicy                 string      `yaml:"restartPolicy"`
		Containers                    []container `yaml:"containers"`
	} `yaml:"spec"`
}

type workload struct {
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	Spec     struct {
		Replicas    *int          `yaml:"replicas"`
		ServiceName string        `yaml:"serviceName"`
		Selector    labelSelector `yaml:"selector"`
		Template    podTemplate   `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdb struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		MaxUnavailable yaml.Node      `yaml:"maxUnavailable"`
		MinAvailable   yaml.Node      `yaml:"minAvailable"`
		Selector       *labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type networkPolicy struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		PodSelector labelSelector `yaml:"podSelector"`
		PolicyTypes []string      `yaml:"policyTypes"`
		Ingress     []struct {
			From []struct {
				PodSelector       *labelSelector `yaml:"podSelector"`
				NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
				IPBlock           any            `yaml:"ipBlock"`
			} `yaml:"from"`
			Ports []struct {
				Port yaml.Node `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"ingress"`
	} `yaml:"spec"`
}

type cluster struct {
	workloads []workload // StatefulSet, Deployment
	jobs      []workload
	services  []service
	pdbs      []pdb
	policies  []networkPolicy
	config    map[string]map[string]string // generated ConfigMaps by name
	image     string                       // the image name kustomize sets
}

func loadK8s(t *testing.T) cluster {
	t.Helper()
	var kust struct {
		Resources          []string `yaml:"resources"`
		ConfigMapGenerator []struct {
			Name string   `yaml:"name"`
			Envs []string `yaml:"envs"`
		} `yaml:"configMapGenerator"`
		Images []struct {
			Name string `yaml:"name"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(read(t, "deploy/k8s/kustomization.yaml"), &kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	c := cluster{config: map[string]map[string]string{}}
	if len(kust.Images) == 1 {
		c.image = kust.Images[0].Name
	}
	for _, g := range kust.ConfigMapGenerator {
		data := map[string]string{}
		for _, f := range g.Envs {
			for _, l := range strings.Split(string(read(t, "deploy/k8s/"+f)), "\n") {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					t.Errorf("%s: %q is not KEY=VALUE", f, l)
				}
				data[k] = v
			}
		}
		c.config[g.Name] = data
	}
	for _, f := range kust.Resources {
		dec := yaml.NewDecoder(strings.NewReader(string(read(t, "deploy/k8s/"+f))))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var head struct {
				Kind string `yaml:"kind"`
			}
			must(t, f, node.Decode(&head))
			switch head.Kind {
			case "StatefulSet", "Deployment":
				var w workload
				must(t, f, node.Decode(&w))
				c.workloads = append(c.workloads, w)
			case "Job":
				var w workload
				must(t, f, node.Decode(&w))
				c.jobs = append(c.jobs, w)
			case "Service":
				var s service
				must(t, f, node.Decode(&s))
				c.services = append(c.services, s)
			case "PodDisruptionBudget":
				var p pdb
				must(t, f, node.Decode(&p))
				c.pdbs = append(c.pdbs, p)
			case "NetworkPolicy":
				var p networkPolicy
				must(t, f, node.Decode(&p))
				c.policies = append(c.policies, p)
			}
		}
	}
	return c
}

func must(t *testing.T, where string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
}

// portNumber resolves a probe's or a Service's port (a number or a name of a
// container port) to a number.
func portNumber(n yaml.Node, c container) int {
	if p, err := strconv.Atoi(n.Value); err == nil {
		return p
	}
	for _, p := range c.Ports {
		if p.Name == n.Value {
			return p.ContainerPort
		}
	}
	return 0
}

// env is a container's SUTRA_* settings: its env list and the ConfigMaps it
// takes whole.
func (cl cluster) env(t *testing.T, c container) map[string]string {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		data, ok := cl.config[from.ConfigMapRef.Name]
		if !ok {
			t.Errorf("container %s takes ConfigMap %s, which kustomization.yaml does not generate", c.Name, from.ConfigMapRef.Name)
		}
		for k, v := range data {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestKubernetesManifestsMatchTheWorker(t *testing.T) {
	cl := loadK8s(t)
	if len(cl.workloads) != 1 {
		t.Fatalf("want one StatefulSet or Deployment, have %d", len(cl.workloads))
	}
	w := cl.workloads[0]
	pod := w.Spec.Template
	if !subset(w.Spec.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("%s selector %v does not match its pod labels %v", w.Metadata.Name, w.Spec.Selector.MatchLabels, pod.Metadata.Labels)
	}
	if w.Spec.Replicas == nil || *w.Spec.Replicas < 2 {
		t.Errorf("%s should run two or more replicas", w.Metadata.Name)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	env := cl.env(t, c)
	names := sortedKeys(env)
	checkEnvNames(t, "the worker container", names)
	if c.Image != cl.image || c.Image == "" {
		t.Errorf("the worker runs image %q; kustomization.yaml sets %q", c.Image, cl.image)
	}
	if len(c.Args) != 1 || c.Args[0] != "run" {
		t.Errorf("the worker runs %v, want [run]", c.Args)
	}

	// The replica id is the pod name: unique, stable for a StatefulSet.
	replicaFromPod := false
	for _, e := range c.Env {
		if e.Name == "SUTRA_REPLICA_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			replicaFromPod = true
		}
	}
	if !replicaFromPod {
		t.Error("SUTRA_REPLICA_ID does not come from the pod name (fieldRef metadata.name)")
	}

	// Ports and probes: readiness on /readyz, liveness on /healthz, both on
	// SUTRA_HTTP_ADDR's port; a startup probe that outlasts the wait for
	// the replica id after a crash.
	ports := map[int]bool{}
	for _, p := range c.Ports {
		ports[p.ContainerPort] = true
	}
	if !ports[httpPort(t)] || !ports[apiPort] || !ports[gatewayPort] {
		t.Errorf("container ports %v, want %d (metrics, health), %d (API) and %d (Zeebe gateway)", c.Ports, httpPort(t), apiPort, gatewayPort)
	}
	checkProbe := func(what string, p *probe, wantPath string) {
		t.Helper()
		switch {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("no HTTP %s probe", what)
		case p.HTTPGet.Path != wantPath:
			t.Errorf("%s probe on %s, want %s", what, p.HTTPGet.Path, wantPath)
		case portNumber(p.HTTPGet.Port, c) != httpPort(t):
			t.Errorf("%s probe on port %q, want %d", what, p.HTTPGet.Port.Value, httpPort(t))
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz")
	checkProbe("liveness", c.LivenessProbe, "/healthz")
	checkProbe("startup", c.StartupProbe, "/healthz")
	if p := c.StartupProbe; p != nil {
		budget := time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
		if ttl := durationSetting(t, env, "SUTRA_LEASE_TTL"); budget < 2*ttl {
			t.Errorf("the startup probe allows %v; a replica restarted after a crash waits up to SUTRA_LEASE_TTL (%v) for its id", budget, ttl)
		}
	}
	if p := pod.Metadata.Annotations["prometheus.io/port"]; p != strconv.Itoa(httpPort(t)) {
		t.Errorf("prometheus.io/port annotation %q, want %d", p, httpPort(t))
	}

	// The grace period outlasts the stop (docs/operations.md#stopping).
	shutdown := durationSetting(t, env, "SUTRA_SHUTDOWN_TIMEOUT")
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown+3*time.Second {
		t.Errorf("terminationGracePeriodSeconds must exceed SUTRA_SHUTDOWN_TIMEOUT (%v) + 3s", shutdown)
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("no %s request", r)
		}
	}

	// Migrations: the Job runs them, the replicas do not.
	if env["SUTRA_MIGRATE"] != "false" {
		t.Errorf("replicas run with SUTRA_MIGRATE=%q; the migration Job applies them", env["SUTRA_MIGRATE"])
	}
	secrets := secretRefs(c)
	if len(cl.jobs) != 1 {
		t.Fatalf("want one migration Job, have %d", len(cl.jobs))
	}
	job := cl.jobs[0].Spec.Template.Spec
	if len(job.Containers) != 1 || !slices.Equal(job.Containers[0].Args, []string{"migrate"}) || job.Containers[0].Image != c.Image {
		t.Errorf("the Job must run `migrate` in image %s: %+v", c.Image, job.Containers)
	} else {
		jc := job.Containers[0]
		checkEnvNames(t, "the migration Job", sortedKeys(cl.env(t, jc)))
		if got, want := secretRefs(jc)["SUTRA_DATABASE_URL"], secrets["SUTRA_DATABASE_URL"]; got != want || got == "" {
			t.Errorf("the Job reads the database URL from %q, the replicas from %q", got, want)
		}
	}
	if job.RestartPolicy != "OnFailure" && job.RestartPolicy != "Never" {
		t.Errorf("the Job's restartPolicy is %q", job.RestartPolicy)
	}
	for _, v := range []string{"SUTRA_DATABASE_URL", "SUTRA_AMQP_URL"} {
		if secrets[v] == "" {
			t.Errorf("%s does not come from a Secret", v)
		}
	}

	// Services select the pods and reach their named ports; the StatefulSet's
	// governing Service is headless.
	byName := map[string]service{}
	for _, s := range cl.services {
		byName[s.Metadata.Name] = s
		if !subset(s.Spec.Selector, pod.Metadata.Labels) {
			t.Errorf("Service %s selects %v, not the worker pods", s.Metadata.Name, s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			if !ports[portNumber(p.TargetPort, c)] {
				t.Errorf("Service %s port %s targets %q, which the container does not have", s.Metadata.Name, p.Name, p.TargetPort.Value)
			}
		}
	}
	if w.Kind == "StatefulSet" {
		if s, ok := byName[w.Spec.ServiceName]; !ok || s.Spec.ClusterIP != "None" {
			t.Errorf("serviceName %q is not a headless Service here", w.Spec.ServiceName)
		}
	}

	// A PodDisruptionBudget over the pods that lets a drain proceed.
	if len(cl.pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, have %d", len(cl.pdbs))
	}
	b := cl.pdbs[0]
	if b.Spec.Selector == nil || !subset(b.Spec.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("the PodDisruptionBudget does not select the worker pods")
	}
	switch {
	case b.Spec.MaxUnavailable.Kind != 0:
		if n, err := strconv.Atoi(b.Spec.MaxUnavailable.Value); err != nil || n < 1 {
			t.Errorf("maxUnavailable %q", b.Spec.MaxUnavailable.Value)
		}
	case b.Spec.MinAvailable.Kind != 0:
		if n, err := strconv.Atoi(b.Spec.MinAvailable.Value); err != nil || w.Spec.Replicas == nil || n >= *w.Spec.Replicas {
			t.Errorf("minAvailable %q leaves no replica to drain", b.Spec.MinAvailable.Value)
		}
	default:
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
}

func secretRefs(c container) map[string]string {
	refs := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return refs
}

// The API is closed as shipped: a worker whose listener has no token
// refuses to start, so every worker the files run gets one, and an admin
// token of its own (the admin API is off without one, and refuses the task
// token), from a Secret on Kubernetes, where a NetworkPolicy also keeps
// other pods off the port.
// deploy/k8s/ha: no single point of failure, and nothing acked lost in a
// failover (docs/operations.md, "High availability"): three PostgreSQL
// instances whose commits wait for a standby even when none is left, three
// RabbitMQ nodes, and the worker told to declare quorum queues on them.
func TestTheHAManifestsReplicateBothEnginesSynchronously(t *testing.T) {
	var pg struct {
		Kind string
		Spec struct {
			Instances  int
			Postgresql struct {
				Synchronous struct {
					Number         int
					DataDurability string `yaml:"dataDurability"`
				}
				Parameters map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(read(t, "deploy/k8s/ha/postgres.yaml"), &pg); err != nil {
		t.Fatal(err)
	}
	sync := pg.Spec.Postgresql.Synchronous
	if pg.Kind != "Cluster" || pg.Spec.Instances != 3 || sync.Number < 1 || sync.DataDurability != "required" {
		t.Errorf("postgres.yaml: %s of %d instances, %d synchronous standby(s), dataDurability %q; want a Cluster of 3, at least 1, required",
			pg.Kind, pg.Spec.Instances, sync.Number, sync.DataDurability)
	}
	if c := pg.Spec.Postgresql.Parameters["synchronous_commit"]; c != "on" && c != "remote_apply" && c != "remote_write" {
		t.Errorf("postgres.yaml: synchronous_commit %q: commits would not wait for the standby", c)
	}
	var mq struct {
		Kind string
		Spec struct{ Replicas int }
	}
	if err := yaml.Unmarshal(read(t, "deploy/k8s/ha/rabbitmq.yaml"), &mq); err != nil {
		t.Fatal(err)
	}
	if mq.Kind != "RabbitmqCluster" || mq.Spec.Replicas != 3 {
		t.Errorf("rabbitmq.yaml: %s of %d replicas, want a RabbitmqCluster of 3", mq.Kind, mq.Spec.Replicas)
	}
	if !strings.Contains(string(read(t, "deploy/k8s/worker.env")), "SUTRA_QUEUE_TYPE=quorum") {
		t.Error("worker.env does not say to declare quorum queues on the cluster")
	}
}

func TestTheShippedWorkersHaveAnAPITokenAndANetworkPolicy(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if len(s.Command) == 0 || s.Command[0] != "run" || !apiOn(s.Environment) {
			continue
		}
		if s.Environment["SUTRA_API_TOKEN"] == "" || s.Environment["SUTRA_API_INSECURE"] == "true" {
			t.Errorf("compose worker %s runs its API without a token", name)
		}
		if admin := s.Environment["SUTRA_ADMIN_TOKEN"]; admin == "" || admin == s.Environment["SUTRA_API_TOKEN"] ||
			s.Environment["SUTRA_ADMIN_INSECURE"] == "true" {
			t.Errorf("compose worker %s has no admin token of its own (%q)", name, admin)
		}
	}

	cl := loadK8s(t)
	if len(cl.workloads) != 1 {
		t.Fatalf("want one StatefulSet or Deployment, have %d", len(cl.workloads))
	}
	pod := cl.workloads[0].Spec.Template
	c0 := pod.Spec.Containers[0]
	if env := cl.env(t, c0); env["SUTRA_API_INSECURE"] == "true" || !apiOn(env) {
		t.Errorf("the worker container runs with SUTRA_API_INSECURE=%q, SUTRA_API_ADDR=%q: the manifests serve the API, with its token", env["SUTRA_API_INSECURE"], env["SUTRA_API_ADDR"])
	}
	refs := secretRefs(c0)
	for _, name := range []string{"SUTRA_API_TOKEN", "SUTRA_ADMIN_TOKEN"} {
		if refs[name] == "" {
			t.Errorf("%s does not come from a Secret", name)
		}
	}
	if refs["SUTRA_API_TOKEN"] == refs["SUTRA_ADMIN_TOKEN"] {
		t.Errorf("SUTRA_API_TOKEN and SUTRA_ADMIN_TOKEN come from one key of the Secret (%s): a task worker's token would be the admin's", refs["SUTRA_API_TOKEN"])
	}

	var covering []networkPolicy
	for _, p := range cl.policies {
		if subset(p.Spec.PodSelector.MatchLabels, pod.Metadata.Labels) {
			covering = append(covering, p)
		}
	}
	if len(covering) == 0 {
		t.Fatal("no NetworkPolicy selects the worker pods")
	}
	for _, p := range covering {
		if !slices.Contains(p.Spec.PolicyTypes, "Ingress") {
			t.Errorf("NetworkPolicy %s does not restrict ingress", p.Metadata.Name)
		}
		for i, rule := range p.Spec.Ingress {
			// A rule with no peers or no ports lets everyone in, or onto every port.
			if len(rule.From) == 0 || len(rule.Ports) == 0 {
				t.Errorf("NetworkPolicy %s ingress rule %d names no peers or no ports: it opens the pods", p.Metadata.Name, i)
			}
			for _, from := range rule.From {
				if from.IPBlock != nil || (from.PodSelector == nil || len(from.PodSelector.MatchLabels) == 0) {
					t.Errorf("NetworkPolicy %s ingress rule %d admits peers by address or every pod: name them by label", p.Metadata.Name, i)
				}
			}
			for _, port := range rule.Ports {
				if portNumber(port.Port, c0) == 0 {
					t.Errorf("NetworkPolicy %s ingress rule %d names port %q, which the container does not have", p.Metadata.Name, i, port.Port.Value)
				}
			}
		}
	}
}

// apiOn reports whether a worker with env listens for API calls
// (SUTRA_API_ADDR unset takes its default; set empty turns it off).
func apiOn(env map[string]string) bool {
	addr, set := env["SUTRA_API_ADDR"]
	return !set || addr != ""
}

// GOMEMLIMIT keeps the Go heap from growing into the container's memory
// limit (a kill) by collecting harder near it; it must leave room below the
// limit for what is not heap.
func TestGOMEMLIMITIsAbout90PercentOfTheMemoryLimit(t *testing.T) {
	check := func(where, limit, gomemlimit string) {
		t.Helper()
		l, err := bytesOf(limit)
		if err != nil {
			t.Errorf("%s: memory limit %q: %v", where, limit, err)
			return
		}
		g, err := bytesOf(gomemlimit)
		if err != nil {
			t.Errorf("%s: GOMEMLIMIT %q: %v", where, gomemlimit, err)
			return
		}
		if r := float64(g) / float64(l); r < 0.8 || r > 0.95 {
			t.Errorf("%s: GOMEMLIMIT %s is %.0f%% of the memory limit %s, want 80-95%%", where, gomemlimit, 100*r, limit)
		}
	}
	c := loadCompose(t)
	for _, name := range sortedKeys(c.Services) {
		if s := c.Services[name]; len(s.Command) > 0 && s.Command[0] == "run" {
			check("compose worker "+name, s.MemLimit, s.Environment["GOMEMLIMIT"])
		}
	}
	cl := loadK8s(t)
	for _, w := range cl.workloads {
		for _, ct := range w.Spec.Template.Spec.Containers {
			gomemlimit := ""
			for _, e := range ct.Env {
				if e.Name == "GOMEMLIMIT" {
					gomemlimit = e.Value
				}
			}
			check(w.Metadata.Name+" container "+ct.Name, ct.Resources.Limits["memory"], gomemlimit)
		}
	}
}

// bytesOf reads a memory size as Kubernetes (512Mi), compose (512m: MiB,
// not Kubernetes' milli) or the Go runtime (460MiB) write it.
func bytesOf(q string) (int64, error) {
	i := strings.IndexFunc(q, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		if i < 0 && q != "" {
			return strconv.ParseInt(q, 10, 64)
		}
		return 0, errors.New("not a size")
	}
	n, err := strconv.ParseInt(q[:i], 10, 64)
	if err != nil {
		return 0, err
	}
	unit := map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
		"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "K": 1000, "M": 1000 * 1000, "G": 1000 * 1000 * 1000}[q[i:]]
	if unit == 0 {
		return 0, fmt.Errorf("unknown unit %q", q[i:])
	}
	return n * unit, nil
}

// --- metric names --------------------------------------------------------------

// appMetrics are registered by app.Start rather than metrics.New: they read
// the worker's own state.
var appMetrics = map[string][]string{
	"sutra_ready": nil, // 1 when /readyz would answer 200; every replica
	// 1 while commits wait for a synchronous standby
	"sutra_database_synchronous": nil,
}

// registered are the metric names metrics.New registers, with their labels.
func registered(t *testing.T) map[string][]string {
	t.Helper()
	reg := &capture{}
	metrics.New(reg)
	names := map[string][]string{}
	fq := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fq.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			names[m[1]] = labels
		}
	}
	if len(names) < 15 {
		t.Fatalf("metrics.New registered only %v", names)
	}
	return names
}

type capture struct{ collectors []prometheus.Collector }

func (r *capture) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}
func (r *capture) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}
func (r *capture) Unregister(prometheus.Collector) bool { return false }

var (
	metricRef = regexp.MustCompile(`\b(sutra_[a-z0-9_]+)(\{[^}]*\})?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// checkMetricRefs reports metric names, and label names in selectors, that
// neither metrics.New nor appMetrics define.
func checkMetricRefs(t *testing.T, where, expr string, known map[string][]string) []string {
	t.Helper()
	var found []string
	for _, m := range metricRef.FindAllStringSubmatch(expr, -1) {
		name := m[1]
		labels, ok := known[name]
		extra := []string{"job", "instance", "namespace", "pod"}
		if !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suffix); base != name {
					if l, has := known[base]; has {
						ok, labels = true, l
						if suffix == "_bucket" {
							extra = append(extra, "le")
						}
					}
				}
			}
		}
		if !ok {
			t.Errorf("%s: %s is not a metric of the worker (metrics.New or app)", where, name)
			continue
		}
		found = append(found, name)
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(labels, lm[1]) && !slices.Contains(extra, lm[1]) {
				t.Errorf("%s: %s has no label %q (labels %v)", where, name, lm[1], labels)
			}
		}
	}
	return found
}

func knownMetrics(t *testing.T) map[string][]string {
	known := registered(t)
	for name, labels := range appMetrics {
		if labels == nil {
			labels = []string{}
		}
		known[name] = labels
	}
	for name, l := range known {
		if l == nil {
			known[name] = []string{}
		}
	}
	return known
}

// --- alerts and runbook --------------------------------------------------------

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// The alerts issue 11 asks for.
var requiredAlerts = []string{
	"SutraClaimBounceShareHigh", "SutraDeadLettersGrowing", "SutraSweeperLeaseUnheld", "SutraClaimOlderThanTimeout",
	"SutraTimerFireLagHigh", "SutraOutboxBacklogGrowing", "SutraIncidentsOpening", "SutraReplicaNotReady",
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	strip := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, l := range strings.Split(md, "\n") {
		if h := strings.TrimLeft(l, "#"); h != l && strings.HasPrefix(h, " ") {
			out[strings.ReplaceAll(strip.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
		}
	}
	return out
}

const runbookURL = "https://github.com/sutra-run/worker/blob/main/docs/runbook.md#"

func TestAlertsHaveSeverityRunbookAndTests(t *testing.T) {
	var rules ruleFile
	if err := yaml.Unmarshal(read(t, "deploy/prometheus/alerts.yml"), &rules); err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(read(t, "deploy/prometheus/alerts_test.yml"), &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	runbook := anchors(string(read(t, "docs/runbook.md")))
	known := knownMetrics(t)
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s has no %s annotation", r.Alert, a)
				}
			}
			if u := r.Annotations["runbook_url"]; !strings.HasPrefix(u, runbookURL) || !runbook[strings.TrimPrefix(u, runbookURL)] {
				t.Errorf("%s: runbook_url %q is not a heading of docs/runbook.md", r.Alert, u)
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s needs a test where it fires and one where it does not in alerts_test.yml", r.Alert)
			}
			checkMetricRefs(t, r.Alert, r.Expr, known)
		}
	}
	for _, a := range requiredAlerts {
		if !seen[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}

// --- Grafana dashboard ---------------------------------------------------------

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// What the dashboard must show (issue 11), by the metrics that show it.
var dashboardMetrics = []string{
	"sutra_relays_total", "sutra_claim_bounces_total", "sutra_relay_requeues_total", "sutra_step_duration_seconds_bucket",
	"sutra_lane_queue_depth", "sutra_lane_wait_seconds_bucket", "sutra_timer_fire_lag_seconds_bucket", "sutra_timer_deferrals_total",
	"sutra_claims_swept_total", "sutra_lease_held", "sutra_outbox_backlog", "sutra_outbox_lag_seconds_bucket",
	"sutra_tasks_locked_total", "sutra_tasks_completed_total", "sutra_incidents_open", "sutra_dead_letter_messages",
	"sutra_dead_letters_total", "sutra_claim_oldest_age_seconds", "sutra_ready",
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(read(t, "deploy/grafana/sutra.json"), &d); err != nil {
		t.Fatalf("sutra.json: %v", err)
	}
	return d
}

func TestDashboardShowsWhatOperatorsNeed(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Error("no datasource variable: the dashboard would be tied to one Prometheus")
	}
	known := knownMetrics(t)
	ids := map[int]string{}
	shown := map[string]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q has gridPos %+v", p.Title, p.GridPos)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range checkMetricRefs(t, "panel "+p.Title, tg.Expr, known) {
				shown[m] = true
			}
		}
	}
	for _, m := range dashboardMetrics {
		if !shown[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// --- promtool ------------------------------------------------------------------

// promtool finds promtool: $PROMTOOL (make test sets it), PATH, or where
// scripts/promtool.sh installs it. Without it the test is skipped, except
// under CI.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	dir := os.Getenv("SUTRA_TOOLS_DIR")
	if dir == "" {
		cache, _ := os.UserCacheDir()
		dir = filepath.Join(cache, "sutra-tools")
	}
	if p := filepath.Join(dir, "bin", "promtool"); fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skip("promtool not found: run scripts/promtool.sh, or make test")
	}
	cmd := exec.Command("scripts/promtool.sh")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/promtool.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestDashboardQueriesParse has promtool parse every dashboard query, with
// Grafana's variables replaced, as a recording rule.
func TestDashboardQueriesParse(t *testing.T) {
	pt := promtool(t)
	d := loadDashboard(t)
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$job", ".*", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel_%d_%s", p.ID, strings.ToLower(tg.RefID)), Expr: vars.Replace(tg.Expr)})
		}
	}
	doc, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pt, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's %d queries: %v\n%s", len(rules), err, out)
	}
}

// TestScrapeOfARealWorkerLints runs the worker binary against the test
// PostgreSQL and RabbitMQ (its own schema and queue names, removed after),
// sends it a few relays, scrapes /metrics and lints the exposition with
// `promtool check metrics`: a parse error fails, lint findings are logged.
func TestScrapeOfARealWorkerLints(t *testing.T) {
	pt := promtool(t)
	if testing.Short() {
		t.Skip("-short: no worker process")
	}
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command("go", "build", "-o", bin, "./cmd/worker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the worker: %v\n%s", err, out)
	}
	env := testkit.New(t) // its own schema and exchange/queue names, dropped at the end
	env.Deploy(t, filepath.Join(root, "examples", "order.bpmn"))
	cfg := env.Config
	cmd := exec.Command(bin, "run")
	cmd.Env = append(os.Environ(),
		"SUTRA_DATABASE_URL="+cfg.DatabaseURL, "SUTRA_AMQP_URL="+cfg.AMQPURL, "SUTRA_REPLICA_ID=opscheck",
		"SUTRA_LANES=2", "SUTRA_PREFETCH=16", "SUTRA_HTTP_ADDR=127.0.0.1:0", "SUTRA_API_ADDR=", "SUTRA_GATEWAY_ADDR=", "SUTRA_MIGRATE=false",
		"SUTRA_RELAY_EXCHANGE="+cfg.RelayExchange, "SUTRA_RELAY_QUEUE="+cfg.RelayQueue,
		"SUTRA_DEAD_EXCHANGE="+cfg.DeadExchange, "SUTRA_DEAD_QUEUE="+cfg.DeadQueue, "SUTRA_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			var line struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "worker started" {
				addr <- line.HTTP
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { <-done; exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("worker exited with %v", err)
			}
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("worker did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not start:\n%s", logs.String())
	}
	testkit.Eventually(t, 30*time.Second, "ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// A few committed steps, so that the histograms have observations.
	const n = 10
	var relays []testkit.Relay
	for i := range n {
		id := fmt.Sprintf("opscheck-%d", i)
		relays = append(relays, testkit.Relay{MessageID: "start-" + id, Body: map[string]any{"start": "order", "instance_id": id, "variables": map[string]any{"orderId": id}}})
	}
	env.Publisher(t).Publish(relays...)
	committed := regexp.MustCompile(`(?m)^sutra_relays_total\{outcome="committed"\} (\d+)`)
	var scrape []byte
	testkit.Eventually(t, 30*time.Second, "relays committed", func() bool {
		scrape = get(t, base+"/metrics")
		m := committed.FindSubmatch(scrape)
		return m != nil && string(m[1]) == strconv.Itoa(n)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lint := exec.CommandContext(ctx, pt, "check", "metrics")
	lint.Stdin = strings.NewReader(string(scrape))
	out, err := lint.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Logf("promtool check metrics: clean (%d bytes scraped)", len(scrape))
	case errors.As(err, &exit) && exit.ExitCode() == 3: // lint findings, not errors
		t.Logf("promtool check metrics findings (not errors):\n%s", out)
	default:
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	// Every family the worker defines up front is in the scrape.
	for _, name := range []string{"sutra_relays_total", "sutra_claim_bounces_total", "sutra_step_duration_seconds_bucket", "sutra_lease_held"} {
		if !strings.Contains(string(scrape), "\n"+name) {
			t.Errorf("the scrape has no %s", name)
		}
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}
