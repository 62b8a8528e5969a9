package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
	"github.com/sutra-run/worker/internal/testkit/apptest"
)

// update writes each page's screenshot into docs/console (docs/console.md).
var update = flag.Bool("update", false, "write the pages' screenshots into docs/console")

const (
	taskToken  = "t0ken"
	adminToken = "adm1n"
)

// consoleWorker is a worker with both tokens and the console on, over the
// test's real PostgreSQL and RabbitMQ, with the console's test process
// deployed.
type consoleWorker struct {
	env  *testkit.Env
	base string
}

// startWorker starts a consoleWorker with the processes of the files also
// names deployed besides the test process.
func startWorker(t testing.TB, also ...string) *consoleWorker {
	t.Helper()
	if _, err := os.Stat("dist/app.js"); err != nil {
		t.Skip("the console is not built: run make console (make test does)")
	}
	env := testkit.New(t)
	for _, file := range append([]string{"testdata/review.bpmn"}, also...) {
		env.Deploy(t, file)
	}
	cfg := apptest.Config(env)
	cfg.API.Token, cfg.AdminToken, cfg.API.Insecure, cfg.UI = taskToken, adminToken, false, true
	w, err := app.Start(testkit.Ctx(t), cfg, app.Options{Logger: testkit.Logger(t), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	return &consoleWorker{env: env, base: "http://" + w.APIAddr()}
}

// v1 calls the admin API and decodes its answer into out (when not nil).
func (c *consoleWorker) v1(t testing.TB, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+"/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// onlyID is the id of the one item a list of /v1 holds under key.
func (c *consoleWorker) onlyID(t *testing.T, path, key string) string {
	t.Helper()
	var page map[string]json.RawMessage
	c.v1(t, "GET", path, nil, &page)
	var items []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(page[key], &items); err != nil || len(items) != 1 {
		t.Fatalf("GET %s: %s, want one item (%v)", path, page[key], err)
	}
	return items[0].ID
}

// browser is a tab of a headless Chromium with a profile of its own, 1280
// CSS pixels wide unless width says otherwise.
func browser(t testing.TB, width ...int) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Skip("no Chromium: run scripts/chromium.sh (make test does) or set CHROMIUM")
	}
	// The flags keep Chromium from reaching for Google's hosts, which a
	// closed network refuses.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(append(width, 1280)[0], 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(testkit.Ctx(t), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Every page records what its Content-Security-Policy refuses (shown).
	// This first run starts the browser: it takes no timeout (Run's rule).
	run(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.violations = [];
				document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective + ' ' + e.blockedURI));`})
		return chromedp.Void{}, err
	})
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	return ctx
}

func run(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signIn opens url, which shows the sign-in form first, and signs in,
// under the name user when given.
func signIn(url, token string, user ...string) chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
	}
	for _, name := range user {
		steps = append(steps, chromedp.SendKeys(chromedp.CSS("#user"), name))
	}
	return chromedp.Steps(append(steps, chromedp.Click(chromedp.CSS("#signin")))...)
}

// shown checks the page on view loaded nothing its Content-Security-Policy
// refused, and saves it as docs/console/name.png under -update.
func shown(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if v := eval[[]string](t, ctx, `Array.isArray(window.violations) ? window.violations : ['(the recorder did not run)']`); len(v) != 0 {
		t.Errorf("page %s: the Content-Security-Policy refused %v", name, v)
	}
	if !*update {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err = os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func startExpense(t *testing.T, w *consoleWorker, id string, vars map[string]any) {
	t.Helper()
	w.v1(t, "POST", "/instances", map[string]any{"definition": "expense", "instance_id": id, "variables": vars}, nil)
}

func TestTheInstancePageMarksTheElementItWaitsAt(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-1", map[string]any{"amount": 40})
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/e-1", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Review"]`)))
	marked := eval[[]string](t, ctx, `[...document.querySelectorAll('.djs-element.sutra-waiting')].map(e => e.dataset.elementId)`)
	if len(marked) != 1 || marked[0] != "Review" {
		t.Errorf("marked waiting: %v, want [Review]", marked)
	}
	shown(t, ctx, "instance")

	run(t, ctx, chromedp.Navigate(w.base+"/ui/processes/expense"),
		chromedp.WaitVisible(chromedp.CSS(`.badges[data-element="Review"] .badge.active`)))
	shown(t, ctx, "process")
	run(t, ctx, chromedp.Navigate(w.base+"/ui/instances?definition=expense"),
		chromedp.WaitVisible(chromedp.Search(`//a[text()="e-1"]`)))
}

func TestRetryingIncidentsFromThePagesResolvesThem(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	// No amount: the gateway's condition fails and stops the token in an
	// incident.
	startExpense(t, w, "e-2", nil)
	incident := w.onlyID(t, "/incidents?open=true&instance_id=e-2", "incidents")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/incidents", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//td/span[@title="Check" and text()="Amount known?"]`)))
	shown(t, ctx, "incidents")

	w.v1(t, "PATCH", "/instances/e-2/variables", map[string]any{"amount": 12}, nil)
	retry := fmt.Sprintf(`button[data-incident="%s"]`, incident)
	run(t, ctx, chromedp.Navigate(w.base+"/ui/instances/e-2"),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-incident[data-element-id="Check"]`)),
		chromedp.Click(chromedp.CSS(retry)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "retried")]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Review"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(retry)))
	if open := w.env.Int(t, "SELECT count(*) FROM incidents WHERE instance_id = 'e-2' AND resolved_at IS NULL"); open != 0 {
		t.Errorf("%d incidents of e-2 still open", open)
	}

	// Two more, grouped on the incidents page and retried at once.
	for _, id := range []string{"e-5", "e-6"} {
		startExpense(t, w, id, nil)
		w.v1(t, "PATCH", "/instances/"+id+"/variables", map[string]any{"amount": 1}, nil)
	}
	run(t, ctx, chromedp.Navigate(w.base+"/ui/incidents"),
		chromedp.Click(chromedp.Search(`//button[text()="Retry 2"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "2 incident(s) retried")]`)))
	if open := w.env.Int(t, "SELECT count(*) FROM incidents WHERE resolved_at IS NULL"); open != 0 {
		t.Errorf("%d incidents still open after the bulk retry", open)
	}
}

func TestAUserTaskCompletedThroughItsFormAdvancesItsInstance(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-3", map[string]any{"amount": 7})
	task := w.onlyID(t, "/user-tasks", "user_tasks")
	ctx := browser(t)
	// The task token sees the user tasks alone.
	run(t, ctx, signIn(w.base+"/ui/tasks", taskToken),
		chromedp.WaitVisible(chromedp.Search(`//a[contains(., "Review expense #")]`)))
	nav := eval[[]string](t, ctx, `[...document.querySelectorAll('nav a')].map(a => a.textContent)`)
	if len(nav) != 1 || nav[0] != "User tasks" {
		t.Errorf("a task token's pages: %v, want [User tasks]", nav)
	}
	shown(t, ctx, "tasks")
	run(t, ctx, chromedp.Navigate(w.base+"/ui/tasks/"+task),
		chromedp.WaitVisible(chromedp.CSS(`.fjs-form input`)),
		chromedp.SendKeys(chromedp.CSS(`.fjs-form input`), "approved"))
	shown(t, ctx, "task")
	run(t, ctx, chromedp.Click(chromedp.CSS("#complete")),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Completion recorded")]`)))
	// The completion reaches the instance through a relay: its page, which
	// follows it, shows it complete.
	run(t, ctx, chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)),
		signIn(w.base+"/ui/instances/e-3", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//strong[@id="status" and text()="completed"]`)))
	var inst struct {
		Variables map[string]any `json:"variables"`
	}
	w.v1(t, "GET", "/instances/e-3", nil, &inst)
	if inst.Variables["decision"] != "approved" {
		t.Errorf("e-3's variables after the form: %v, want decision approved", inst.Variables)
	}
}

func TestAWrongTokenIsRefused(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances", "wrong"),
		chromedp.WaitVisible(chromedp.Search(`//p[@role="alert" and contains(., "This token is refused")]`)))
	stored := eval[string](t, ctx, `sessionStorage.getItem('sutra.token') || ''`)
	if stored != "" {
		t.Errorf("the refused token was kept: %q", stored)
	}
	shown(t, ctx, "signin")
}

func TestThePagesReflowAt200PercentZoom(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-4", map[string]any{"amount": 3, "note": "a long note that must wrap rather than widen the page"})
	// A 1280-pixel screen at 200% zoom is 640 CSS pixels wide.
	ctx := browser(t, 640)
	run(t, ctx, signIn(w.base+"/ui/instances/e-4", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Review"]`)))
	if width := eval[float64](t, ctx, `window.innerWidth`); width > 640 {
		t.Fatalf("the window is %v CSS pixels wide, want 640", width)
	}
	pages := []struct{ path, ready string }{
		{"/ui/instances/e-4", `g.djs-element.sutra-waiting[data-element-id="Review"]`},
		{"/ui/instances?definition=expense", `td a[href="/ui/instances/e-4"]`},
		{"/ui/processes/expense", `.badges[data-element="Review"]`},
		{"/ui/incidents", `table`},
		{"/ui/tasks", `td a[href^="/ui/tasks/"]`},
	}
	for _, p := range pages {
		run(t, ctx, chromedp.Navigate(w.base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		if over := eval[float64](t, ctx, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
			t.Errorf("%s at 640 CSS pixels: %v pixels wider than the window", p.path, over)
		}
	}
}
