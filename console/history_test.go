package console_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// startSteps starts an instance of the steps process (two message waits in
// a row) under id, with correlation key key.
func startSteps(t *testing.T, w *consoleWorker, id, key string) {
	t.Helper()
	w.v1(t, "POST", "/instances", map[string]any{"definition": "steps", "instance_id": id, "variables": map[string]any{"key": key}}, nil)
}

// stepRow is the text of the history's row of step n.
func stepRow(t *testing.T, ctx context.Context, n string) string {
	t.Helper()
	return eval[string](t, ctx, `document.querySelector('tr[data-step="`+n+`"]').textContent`)
}

func TestTheHistoryShowsTheStepARelayCausedAndThePageFollowsIt(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	w.env.Deploy(t, "testdata/steps.bpmn")
	startSteps(t, w, "s-1", "k1")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/s-1", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Go"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="1"]`)))
	if row := stepRow(t, ctx, "1"); !strings.Contains(row, "admin_start") || !strings.Contains(row, "/admin") {
		t.Errorf("step 1 reads %q, want the admin start under the admin owner", row)
	}
	// A relay advances the instance while its page is open: the page follows
	// it, and its history names the relay.
	w.v1(t, "POST", "/messages", map[string]any{"message": "go", "instance_id": "s-1", "message_id": "go-s-1"}, nil)
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-step="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Again"]`)))
	row := stepRow(t, ctx, "2")
	for _, want := range []string{"relay", "message go", "go-s-1", "/lane/"} {
		if !strings.Contains(row, want) {
			t.Errorf("step 2 reads %q, want %q in it", row, want)
		}
	}
	if marked := eval[[]string](t, ctx, `[...document.querySelectorAll('.djs-element.sutra-waiting')].map(e => e.dataset.elementId)`); len(marked) != 1 || marked[0] != "Again" {
		t.Errorf("marked waiting after the relay: %v, want [Again]", marked)
	}
	shown(t, ctx, "history")
}

// passedMarks are the ids of the diagram's elements and flows marked passed.
func passedMarks(t *testing.T, ctx context.Context) []string {
	t.Helper()
	ids := eval[[]string](t, ctx, `[...document.querySelectorAll('.djs-element.sutra-passed')].map(e => e.dataset.elementId)`)
	slices.Sort(ids)
	return ids
}

func TestTheInstancePageMarksThePathItTookAndListsItPerStep(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	w.env.Deploy(t, "testdata/steps.bpmn")
	startSteps(t, w, "s-3", "k3")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/s-3", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Go"]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-passed[data-element-id="S1"]`)))
	if got := passedMarks(t, ctx); !slices.Equal(got, []string{"Begin", "S1"}) {
		t.Errorf("marked passed after the start: %v, want [Begin S1]: the element it waits at is not passed", got)
	}
	if row := stepRow(t, ctx, "1"); !strings.Contains(row, "Begin → S1") {
		t.Errorf("step 1 reads %q, want its path Begin → S1", row)
	}
	// A relay moves it on while the page is open: the path grows by what
	// the step passed.
	w.v1(t, "POST", "/messages", map[string]any{"message": "go", "instance_id": "s-3", "message_id": "go-s-3"}, nil)
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Again"]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-passed[data-element-id="S2"]`)))
	if got := passedMarks(t, ctx); !slices.Equal(got, []string{"Begin", "Go", "S1", "S2"}) {
		t.Errorf("marked passed after the relay: %v, want [Begin Go S1 S2]", got)
	}
	if row := stepRow(t, ctx, "2"); !strings.Contains(row, "Go → S2") {
		t.Errorf("step 2 reads %q, want its path Go → S2", row)
	}
	if legend := eval[string](t, ctx, `document.querySelector('ul.legend').textContent`); !strings.Contains(legend, "Passed") {
		t.Errorf("the legend reads %q, want the passed mark named", legend)
	}
	shown(t, ctx, "path")
}

func TestMigratingFromTheInstancePageShowsThePreflightsAnswer(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	w.env.Deploy(t, "testdata/steps.bpmn")
	startSteps(t, w, "s-2", "k2")
	w.env.Deploy(t, "testdata/steps-v2.bpmn") // renames Go to GoNow
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/s-2", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="Go"]`)),
		chromedp.Click(chromedp.Search(`//summary[text()="Migrate to another version"]`)),
		// Unmapped, Go has no place in version 2: the server's preflight says
		// what the migration would answer.
		chromedp.WaitVisible(chromedp.Search(`//p[@role="alert" and contains(., "422 SUTRA.ADMIN.MIGRATE.UNREACHABLE")]`)),
		chromedp.SetValue(chromedp.CSS("#mapping"), `{"Go": "GoNow"}`))
	eval[bool](t, ctx, `document.getElementById('mapping').dispatchEvent(new Event('change'))`)
	run(t, ctx, chromedp.WaitVisible(chromedp.Search(`//td[text()="GoNow"]`)))
	shown(t, ctx, "migrate")
	run(t, ctx, chromedp.Click(chromedp.Search(`//button[text()="Migrate"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Migrated to steps v2")]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-waiting[data-element-id="GoNow"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="2"]`)))
	if row := stepRow(t, ctx, "2"); !strings.Contains(row, "admin_migrate") || !strings.Contains(row, "to version 2") {
		t.Errorf("step 2 reads %q, want the migration to version 2", row)
	}
}

// focused describes the element that has the focus: its text or label, and
// whether a focus outline shows.
type focused struct {
	Label   string `json:"label"`
	Outline bool   `json:"outline"`
}

// tabThrough presses Tab n times from the top of the page and answers each
// element it reached.
func tabThrough(t *testing.T, ctx context.Context, n int) []focused {
	t.Helper()
	eval[bool](t, ctx, `(document.activeElement && document.activeElement.blur(), window.scrollTo(0, 0), true)`)
	var out []focused
	for range n {
		run(t, ctx, chromedp.KeyEvent(kb.Tab))
		out = append(out, eval[focused](t, ctx, `(() => {
			const e = document.activeElement;
			if (!e || e === document.body) return { label: 'BODY', outline: false };
			const named = e.labels && e.labels.length ? e.labels[0].textContent : e.getAttribute('aria-label') || e.textContent;
			const label = (named || e.id || e.tagName).trim().slice(0, 60);
			return { label, outline: getComputedStyle(e).outlineStyle !== 'none' };
		})()`))
	}
	return out
}

func TestTheMainControlsAreReachableByKeyboardWithAVisibleFocus(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-k", map[string]any{"amount": 9})
	ctx := browser(t)
	pages := []struct {
		path, ready string
		want        []string
	}{
		{"/ui/instances/e-k", `tr[data-step="1"]`,
			[]string{"Skip to the page", "Processes", "Instances", "Incidents", "User tasks", "Sign out", "expense v1", "Cancel instance", "Edit variables"}},
		{"/ui/instances", `td a[href="/ui/instances/e-k"]`,
			[]string{"Skip to the page", "Sign out", "Process", "Variable", "Filter", "e-k"}},
	}
	run(t, ctx, signIn(w.base+pages[0].path, adminToken), chromedp.WaitVisible(chromedp.CSS(pages[0].ready)))
	for _, p := range pages {
		run(t, ctx, chromedp.Navigate(w.base+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		// The list's filters hold two date-time fields of seven parts each.
		reached := tabThrough(t, ctx, 50)
		for _, f := range reached {
			if !f.Outline && f.Label != "BODY" {
				t.Errorf("%s: %q takes the focus without showing it", p.path, f.Label)
			}
		}
		for _, want := range p.want {
			found := false
			for _, f := range reached {
				found = found || strings.HasPrefix(f.Label, want)
			}
			if !found {
				t.Errorf("%s: Tab never reaches %q; it reaches %v", p.path, want, reached)
			}
		}
	}
}

func TestThePagesHaveNoHorizontalOverflowAtTwiceTheDeviceScale(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	w.env.Deploy(t, "testdata/steps.bpmn")
	startSteps(t, w, "s-z", "a correlation key long enough to wrap rather than widen the page")
	w.env.Deploy(t, "testdata/steps-v2.bpmn")
	// 200% zoom: a 1280-pixel screen shows 640 CSS pixels, each drawn with
	// 2 device pixels.
	ctx := browser(t, 640)
	run(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: 640, Height: 900, DeviceScaleFactor: 2})
		return chromedp.Void{}, err
	})
	run(t, ctx, signIn(w.base+"/ui/instances/s-z", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="1"]`)),
		chromedp.Click(chromedp.Search(`//summary[text()="Migrate to another version"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[@role="alert" and contains(., "would be refused")]`)))
	if dpr := eval[float64](t, ctx, `window.devicePixelRatio`); dpr != 2 {
		t.Fatalf("device pixel ratio %v, want 2", dpr)
	}
	if over := eval[float64](t, ctx, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
		t.Errorf("the instance page with its history and migration preview at 640 CSS pixels, scale 2: %v pixels wider than the window", over)
	}
}
