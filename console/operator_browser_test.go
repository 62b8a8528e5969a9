package console_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sutra-run/worker/internal/testkit"
)

// A called instance's id holds '/' (<parent>/<token>): it opens from its
// parent's page and from the address bar, leads back to its parent, and
// its incident shows on the parent, in the list and on the heatmap.
func TestACalledInstanceOpensFromItsParentWhichShowsItsIncident(t *testing.T) {
	t.Parallel()
	w := startWorker(t, "testdata/trip.bpmn")
	// No amount: the called expense stops at its gateway in an incident.
	w.v1(t, "POST", "/instances", map[string]any{"definition": "trip", "instance_id": "t-1"}, nil)
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances?definition=trip", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="t-1"]]/td/span[@class="bad" and text()="open"]`)),
		chromedp.Click(chromedp.Search(`//a[text()="t-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-incident[data-element-id="Approve"]`)),
		chromedp.WaitVisible(chromedp.Search(`//caption[text()="Open incidents in called instances"]`)))
	child := eval[string](t, ctx, `[...document.querySelectorAll('td a')].map(a => a.textContent).find(s => s.startsWith('t-1/')) || ''`)
	if !strings.HasPrefix(child, "t-1/") {
		t.Fatalf("the parent's page links no called instance (found %q)", child)
	}
	shown(t, ctx, "called")

	var parent struct {
		Tokens []struct {
			Element        string `json:"element"`
			CalledInstance string `json:"called_instance"`
		} `json:"tokens"`
		CalledIncidents []struct {
			InstanceID string `json:"instance_id"`
			Element    string `json:"element"`
			CalledBy   string `json:"called_by"`
		} `json:"called_incidents"`
	}
	w.v1(t, "GET", "/instances/t-1", nil, &parent)
	if len(parent.Tokens) != 1 || parent.Tokens[0].CalledInstance != child {
		t.Errorf("t-1's tokens: %+v, want one calling %s", parent.Tokens, child)
	}
	if len(parent.CalledIncidents) != 1 || parent.CalledIncidents[0].InstanceID != child ||
		parent.CalledIncidents[0].Element != "Check" || parent.CalledIncidents[0].CalledBy != "Approve" {
		t.Errorf("t-1's called incidents: %+v, want %s's at Check, called by Approve", parent.CalledIncidents, child)
	}

	// From the call activity's token to the child, whose address holds its
	// id encoded once.
	run(t, ctx, chromedp.Click(chromedp.Search(`//table[caption="Tokens"]//a[text()="`+child+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Instance `+child+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-incident[data-element-id="Check"]`)))
	if got, want := eval[string](t, ctx, `location.pathname`), "/ui/instances/"+url.PathEscape(child); got != want {
		t.Errorf("the child's address: %s, want %s", got, want)
	}
	// Back to the parent, and to the child again from the address bar.
	run(t, ctx, chromedp.Click(chromedp.Search(`//p[contains(., "parent")]/a[text()="t-1"]`)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Instance t-1"]`)),
		chromedp.Navigate(w.base+"/ui/instances/"+url.PathEscape(child)),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Instance `+child+`"]`)),
		chromedp.Navigate(w.base+"/ui/processes/trip"),
		chromedp.WaitVisible(chromedp.CSS(`.badges[data-element="Approve"] .badge.incident`)))
}

func TestClaimingATaskShowsItsNewAssignee(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-7", map[string]any{"amount": 5})
	task := w.onlyID(t, "/user-tasks", "user_tasks")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/tasks/"+task, adminToken, "alice"),
		chromedp.WaitVisible(chromedp.Search(`//strong[@id="current-assignee" and text()="nobody"]`)),
		chromedp.Click(chromedp.Search(`//button[text()="Claim as alice"]`)),
		chromedp.WaitVisible(chromedp.Search(`//strong[@id="current-assignee" and text()="alice"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Claimed by alice.")]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//button[text()="Claim as alice"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[text()="Unassign"]`)))
}

// A retry that stops at once in a new incident says so; one that ends the
// instance takes its actions away.
func TestARetryShowsWhetherItFailedAgainAndEndsTheActions(t *testing.T) {
	t.Parallel()
	w := startWorker(t, "testdata/gate.bpmn")
	w.v1(t, "POST", "/instances", map[string]any{"definition": "gate", "instance_id": "g-1"}, nil)
	first := w.onlyID(t, "/incidents?open=true&instance_id=g-1", "incidents")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/g-1", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//button[text()="Cancel instance"]`)),
		chromedp.Click(chromedp.CSS(`button[data-incident="`+first+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[@role="alert" and contains(., "failed again")]`)))
	if ok := eval[int](t, ctx, `document.querySelectorAll('p.notice.ok').length`); ok != 0 {
		t.Errorf("a retry that failed again shows %d success notice(s)", ok)
	}
	second := w.onlyID(t, "/incidents?open=true&instance_id=g-1", "incidents")

	w.v1(t, "PATCH", "/instances/g-1/variables", map[string]any{"pass": 1}, nil)
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[data-incident="`+second+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "retried.")]`)),
		chromedp.WaitVisible(chromedp.Search(`//strong[@id="status" and text()="completed"]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//button[text()="Cancel instance"]`)))
}

// The page loads its icon, and its bundle gzipped, from a browser that
// accepts gzip.
func TestTheConsoleIsServedGzippedWithItsIcon(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	ctx := browser(t)
	run(t, ctx, chromedp.Navigate(w.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	sizes := eval[[]float64](t, ctx, `(() => {
		const e = performance.getEntriesByType('resource').find((r) => r.name.endsWith('/ui/app.js'));
		return e ? [e.encodedBodySize, e.decodedBodySize] : [];
	})()`)
	if len(sizes) != 2 || sizes[0] <= 0 || sizes[0] > sizes[1]/2 {
		t.Errorf("app.js reached the browser as [sent, decoded] %v bytes, want it sent gzipped (under half)", sizes)
	}
	icon, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`fetch('/favicon.ico').then((r) => r.status + ' ' + r.headers.get('Content-Type'))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if icon != "200 image/x-icon" {
		t.Errorf("/favicon.ico: %s, want 200 image/x-icon", icon)
	}

	raw, err := os.ReadFile("dist/app.js")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", w.base+"/ui/app.js", nil)
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if enc := resp.Header.Get("Content-Encoding"); enc != "gzip" || len(body) > len(raw)/2 {
		t.Fatalf("app.js: Content-Encoding %q, %d bytes of %d, want gzip under half", enc, len(body), len(raw))
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, raw) {
		t.Errorf("app.js gunzipped: %d bytes (%v), want dist/app.js's %d", len(plain), err, len(raw))
	}
}

// The instances selected, then all that match the filters, are cancelled
// by batches the server runs, whose progress the page follows.
func TestABatchCancelsTheInstancesSelectedOrAllThatMatch(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	for _, id := range []string{"e-a", "e-b", "e-c", "e-d"} {
		startExpense(t, w, id, map[string]any{"amount": 1})
	}
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances?definition=expense", adminToken),
		chromedp.Click(chromedp.CSS(`input[data-instance="e-a"]`)),
		chromedp.Click(chromedp.CSS(`input[data-instance="e-b"]`)),
		chromedp.Click(chromedp.Search(`//div[@id="batch"]/button[text()="Cancel"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Cancel 2 selected instance(s)?")]`)),
		chromedp.Click(chromedp.CSS(`#batch-confirm`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="batch-progress"]/p[contains(., "Batch cancel done: 2 done of 2, 0 refused, 0 failed, 0 to retry.")]`)),
		// The list shows them as they are now.
		chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="e-b"]]/td[text()="cancelled"]`)))
	status := func(id string) string {
		var inst struct {
			Status string `json:"status"`
		}
		w.v1(t, "GET", "/instances/"+id, nil, &inst)
		return inst.Status
	}
	for id, want := range map[string]string{"e-a": "cancelled", "e-b": "cancelled", "e-c": "active", "e-d": "active"} {
		if got := status(id); got != want {
			t.Errorf("%s after cancelling e-a and e-b: %s, want %s", id, got, want)
		}
	}
	shown(t, ctx, "batch")

	run(t, ctx, chromedp.Navigate(w.base+"/ui/instances?definition=expense&status=active"),
		chromedp.WaitVisible(chromedp.CSS(`input[data-instance="e-c"]`)),
		chromedp.Click(chromedp.CSS(`#batch-all`)),
		chromedp.Click(chromedp.Search(`//div[@id="batch"]/button[text()="Cancel"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Cancel every instance that matches these filters?")]`)),
		chromedp.Click(chromedp.CSS(`#batch-confirm`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="batch-progress"]/p[contains(., "Batch cancel done: 2 done, 0 refused")]`)))
	for _, id := range []string{"e-c", "e-d"} {
		if got := status(id); got != "cancelled" {
			t.Errorf("%s after cancelling all that match: %s, want cancelled", id, got)
		}
	}
}

// A task that failed for good shows its worker's message and stack trace
// in /v1 and on the instance's page, under a banner; the incidents page
// names its process.
func TestAnIncidentShowsItsWorkersErrorUnderABanner(t *testing.T) {
	t.Parallel()
	w := startWorker(t, "testdata/charge.bpmn")
	w.v1(t, "POST", "/instances", map[string]any{"definition": "charge", "instance_id": "c-1"}, nil)
	var locked []struct {
		ID string `json:"id"`
	}
	engineREST(t, w, "/external-task/fetchAndLock", map[string]any{"workerId": "w", "maxTasks": 1,
		"topics": []map[string]any{{"topicName": "charge", "lockDuration": 60000}}}, &locked)
	if len(locked) != 1 {
		t.Fatalf("fetchAndLock: %v, want c-1's task", locked)
	}
	const details = "java.lang.IllegalStateException: card declined\n\tat shop.Charge.run(Charge.java:42)"
	engineREST(t, w, "/external-task/"+locked[0].ID+"/failure", map[string]any{"workerId": "w", "errorMessage": "card declined",
		"errorDetails": details, "retries": 0}, nil)

	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/c-1", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="incident-banner" and contains(., "1 open incident(s). SUTRA.INCIDENT.TASK_FAILED at Charge: card declined")]`)),
		chromedp.Click(chromedp.Search(`//summary[contains(., "The worker's error: card declined")]`)),
		chromedp.WaitVisible(chromedp.Search(`//details/pre[contains(., "Charge.java:42")]`)))
	shown(t, ctx, "incident")
	run(t, ctx, chromedp.Navigate(w.base+"/ui/incidents"),
		chromedp.WaitVisible(chromedp.Search(`//td/span[@title="charge v1"]/a[text()="Charge v1"]`)))

	var page struct {
		Incidents []struct {
			ErrorMessage *string `json:"error_message"`
			ErrorDetails *string `json:"error_details"`
			Definition   struct {
				Key string `json:"key"`
			} `json:"definition"`
		} `json:"incidents"`
	}
	w.v1(t, "GET", "/incidents?instance_id=c-1", nil, &page)
	if len(page.Incidents) != 1 || page.Incidents[0].ErrorMessage == nil || *page.Incidents[0].ErrorMessage != "card declined" ||
		page.Incidents[0].ErrorDetails == nil || *page.Incidents[0].ErrorDetails != details || page.Incidents[0].Definition.Key != "charge" {
		t.Errorf("c-1's incidents: %+v, want the worker's message and details, of process charge", page.Incidents)
	}
}

// engineREST calls the task API (/engine-rest) with the task token and
// decodes its answer into out (when not nil).
func engineREST(t *testing.T, w *consoleWorker, path string, body, out any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", w.base+"/engine-rest"+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+taskToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, answer)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, answer)
		}
	}
}

// Every timestamp follows one rule: local time with its zone named, UTC on
// hover; a user task's due date too.
func TestTimestampsAreLocalWithTheirZoneAndUTCOnHover(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-8", map[string]any{"amount": 2})
	task := w.onlyID(t, "/user-tasks", "user_tasks")
	w.v1(t, "PATCH", "/user-tasks/"+task, map[string]any{"due_date": "2026-12-24T17:00:00Z"}, nil)
	ctx := browser(t)
	run(t, ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
		return chromedp.Void{}, err
	}, signIn(w.base+"/ui/tasks", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//time[@datetime="2026-12-24T17:00:00.000Z"]`)))
	due := eval[[]string](t, ctx, `(() => { const e = document.querySelector('time[datetime="2026-12-24T17:00:00.000Z"]'); return [e.textContent, e.title]; })()`)
	if !strings.Contains(due[0], "6:00") || !strings.Contains(due[0], "GMT+1") || due[1] != "2026-12-24 17:00:00 UTC" {
		t.Errorf("the due date reads %q, on hover %q: want 6:00 PM in Berlin, its zone named, UTC on hover", due[0], due[1])
	}
	// The page draws its sections one after the other: wait for the
	// timestamps of all three (status, tokens, history) rather than the first.
	run(t, ctx, chromedp.Navigate(w.base+"/ui/instances/e-8"), chromedp.WaitVisible(chromedp.CSS(`#status`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('main time').length >= 3`))
	bare := eval[int](t, ctx, `[...document.querySelectorAll('main time')].filter((e) => !e.title.endsWith(' UTC') || !/GMT|CET/.test(e.textContent)).length`)
	stamps := eval[int](t, ctx, `document.querySelectorAll('main time').length`)
	if stamps < 3 || bare != 0 {
		t.Errorf("the instance page shows %d timestamps, %d of them without their zone or UTC on hover", stamps, bare)
	}
}

// The Tasklist lists the unassigned tasks and those assigned to the name
// signed in, follows changes by itself (until paused), and shows a task's
// variables beside its form.
func TestTheTasklistFiltersRefreshesAndShowsVariablesBesideTheForm(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-9", map[string]any{"amount": 9})
	mine := w.onlyID(t, "/user-tasks", "user_tasks")
	w.v1(t, "POST", "/user-tasks/"+mine+"/assignment", map[string]any{"assignee": "alice"}, nil)
	startExpense(t, w, "e-10", map[string]any{"amount": 10})
	other := w.onlyID(t, "/user-tasks?assigned=false", "user_tasks")
	ctx := browser(t)
	link := func(id string) string { return `//td//a[@href="/ui/tasks/` + id + `"]` }
	run(t, ctx, signIn(w.base+"/ui/tasks", taskToken, "alice"),
		chromedp.WaitVisible(chromedp.Search(link(mine))),
		chromedp.Click(chromedp.Search(`//button[text()="Unassigned"]`)),
		chromedp.WaitVisible(chromedp.Search(link(other))),
		chromedp.WaitNotPresent(chromedp.Search(link(mine))),
		chromedp.Click(chromedp.Search(`//button[text()="Assigned to me"]`)),
		chromedp.WaitVisible(chromedp.Search(link(mine))),
		chromedp.WaitNotPresent(chromedp.Search(link(other))),
		chromedp.Navigate(w.base+"/ui/tasks?assigned=false"),
		chromedp.WaitVisible(chromedp.Search(link(other))))
	// Claimed elsewhere, it leaves the unassigned list by itself.
	w.v1(t, "POST", "/user-tasks/"+other+"/assignment", map[string]any{"assignee": "bob"}, nil)
	run(t, ctx, chromedp.WaitNotPresent(chromedp.Search(link(other))),
		chromedp.Click(chromedp.Search(`//button[text()="Pause auto-refresh"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[@aria-pressed="true" and text()="Resume auto-refresh"]`)),
		chromedp.Navigate(w.base+"/ui/tasks/"+mine),
		chromedp.WaitVisible(chromedp.CSS(`.fjs-form input`)),
		chromedp.WaitVisible(chromedp.Search(`//aside//tr[td[text()="amount"]]/td/code[text()="9"]`)))
	var page struct {
		UserTasks []struct {
			ID string `json:"id"`
		} `json:"user_tasks"`
	}
	w.v1(t, "GET", "/user-tasks?assigned=true", nil, &page)
	if len(page.UserTasks) != 2 {
		t.Errorf("GET /v1/user-tasks?assigned=true: %v, want both tasks", page.UserTasks)
	}
}

// The instance list opens an instance by its id, shows how long each ran,
// and follows changes by itself.
func TestTheInstanceListSearchesByIDShowsDurationsAndRefreshes(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-11", map[string]any{"amount": 11})
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances?definition=expense", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="e-11"]]/td[contains(., "s (running)")]`)),
		chromedp.SendKeys(chromedp.CSS(`#search-id`), "nope\n"),
		chromedp.WaitVisible(chromedp.Search(`//p[@role="alert" and text()="No instance has the id or the business key nope."]`)))
	w.v1(t, "POST", "/instances/e-11/cancel", map[string]any{}, nil)
	run(t, ctx, chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="e-11"]]/td[text()="cancelled"]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//tr[td/a[text()="e-11"]]/td[contains(., "(running)")]`)),
		chromedp.Navigate(w.base+"/ui/instances"),
		chromedp.WaitVisible(chromedp.CSS(`#search-id`)),
		chromedp.SendKeys(chromedp.CSS(`#search-id`), "e-11\n"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Instance e-11"]`)))
}

// Elements are shown by their names, their ids on hover: on the instance
// page, the heatmap's table and in the Tasklist, which names the process
// too.
func TestElementsAreShownByTheirNamesWithTheirIdsOnHover(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "e-12", map[string]any{"amount": 12})
	task := w.onlyID(t, "/user-tasks", "user_tasks")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/e-12", adminToken),
		chromedp.WaitVisible(chromedp.Search(`//table[caption="Tokens"]//span[@title="Review" and text()="Review expense"]`)),
		chromedp.Navigate(w.base+"/ui/processes/expense"),
		chromedp.WaitVisible(chromedp.Search(`//td/span[@title="Review" and text()="Review expense"]`)),
		chromedp.Navigate(w.base+"/ui/tasks"),
		chromedp.WaitVisible(chromedp.Search(`//span[@title="Review"]/a[text()="Review expense #`+task+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@title="expense" and text()="Expense v1"]`)))
	var u struct {
		Name        string `json:"name"`
		ProcessName string `json:"process_name"`
	}
	w.v1(t, "GET", "/user-tasks/"+task, nil, &u)
	if u.Name != "Review expense" || u.ProcessName != "Expense" {
		t.Errorf("user task %s: name %q, process %q, want Review expense, Expense", task, u.Name, u.ProcessName)
	}
}

// The instance list goes back a page as well as on.
func TestTheInstanceListGoesBackAPage(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	for i := range 55 {
		startExpense(t, w, fmt.Sprintf("p-%02d", i), map[string]any{"amount": 1})
	}
	ctx := browser(t)
	row := func(id string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.Search(`//td/a[text()="` + id + `"]`))
	}
	// Newest first: p-54 to p-05, then p-04 to p-00.
	run(t, ctx, signIn(w.base+"/ui/instances?definition=expense", adminToken), row("p-54"),
		chromedp.Click(chromedp.Search(`//a[text()="Next page →"]`)), row("p-00"),
		chromedp.WaitNotPresent(chromedp.Search(`//td/a[text()="p-54"]`)),
		chromedp.Click(chromedp.Search(`//a[text()="← Previous page"]`)), row("p-54"),
		chromedp.WaitNotPresent(chromedp.Search(`//a[text()="← Previous page"]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[text()="Next page →"]`)))
}

// A token stopped in an incident is moved to the end event from the
// instance page, after the server's preflight says where it would land.
func TestAnInstanceIsModifiedFromItsPageAfterAPreflight(t *testing.T) {
	t.Parallel()
	w := startWorker(t, "testdata/gate.bpmn")
	w.v1(t, "POST", "/instances", map[string]any{"definition": "gate", "instance_id": "g-9"}, nil)
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/instances/g-9", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`g.djs-element.sutra-incident[data-element-id="Pass"]`)),
		chromedp.Click(chromedp.Search(`//summary[text()="Modify the instance (move tokens)"]`)),
		chromedp.Click(chromedp.CSS(`input[data-token="t1"]`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="modify-preview"]/p[contains(., "would be refused (422 SUTRA.ADMIN.MODIFY.REFUSED)")]`)),
		chromedp.SetValue(chromedp.CSS(`#modify-activate`), "Out"))
	eval[bool](t, ctx, `document.getElementById('modify-activate').dispatchEvent(new Event('change'))`)
	run(t, ctx, chromedp.WaitVisible(chromedp.Search(`//div[@id="modify-preview"]/p[contains(., "the instance would be completed")]`)))
	shown(t, ctx, "modify")
	run(t, ctx, chromedp.Click(chromedp.CSS(`#modify-apply`)),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Modified: the instance is completed.")]`)),
		chromedp.WaitVisible(chromedp.Search(`//strong[@id="status" and text()="completed"]`)),
		chromedp.WaitNotPresent(chromedp.Search(`//button[text()="Cancel instance"]`)))
	if open := w.env.Int(t, "SELECT count(*) FROM incidents WHERE instance_id = 'g-9' AND resolved_at IS NULL"); open != 0 {
		t.Errorf("%d incidents of g-9 left open by the modification", open)
	}
}

// The instance list shows the newest started first, the latest ended
// first when asked, counts what matches, filters by the element a token
// waits at (by its name) and searches by business key and by a variable.
func TestTheInstanceListSortsCountsAndSearchesByKeyElementAndVariable(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "s-1", map[string]any{"amount": 1})
	startExpense(t, w, "s-2", map[string]any{"amount": 2})
	startExpense(t, w, "s-3", nil) // stopped at the gateway, in an incident
	startExpense(t, w, "s-4", map[string]any{"amount": 4})
	w.v1(t, "POST", "/instances/s-2/cancel", map[string]any{}, nil)
	// What a start by a message with a correlation key leaves on the row.
	if _, err := w.env.DB.Exec(testkit.Ctx(t), "UPDATE instances SET start_correlation_key = 'claim-4' WHERE id = 's-4'"); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	rows := func(want ...string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('tbody td:nth-child(2) a')].map((a) => a.textContent).join(' ') === ` +
			"`" + strings.Join(want, " ") + "`")
	}
	run(t, ctx, signIn(w.base+"/ui/instances", adminToken),
		rows("s-4", "s-3", "s-2", "s-1"),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="instance-count" and text()="4 instance(s) match."]`)),
		chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="s-2"]]/td[last()-1]/time`)),
		chromedp.WaitVisible(chromedp.Search(`//tr[td/a[text()="s-1"]]/td[last()][contains(., "(running)")]`)))
	shown(t, ctx, "instances")
	run(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name="sort"]`), "end"),
		chromedp.Click(chromedp.Search(`//button[text()="Filter"]`)),
		rows("s-2"),
		chromedp.WaitVisible(chromedp.Search(`//caption[text()="Instances, latest ended first (ended only)"]`)),
		chromedp.Navigate(w.base+"/ui/instances?definition=expense"),
		chromedp.WaitReady(chromedp.Search(`//select[@name="waiting_at"]/option[@value="Review" and @title="Review" and text()="Review expense (Review)"]`)),
		chromedp.SetValue(chromedp.CSS(`select[name="waiting_at"]`), "Review"),
		chromedp.Click(chromedp.Search(`//button[text()="Filter"]`)),
		rows("s-4", "s-1"),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="instance-count" and text()="2 instance(s) match."]`)))
	shown(t, ctx, "waiting-at")
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`#search-id`), "claim-4\n"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Instance s-4"]`)),
		chromedp.Navigate(w.base+"/ui/instances"),
		chromedp.WaitVisible(chromedp.CSS(`#search-id`)),
		chromedp.SendKeys(chromedp.CSS(`#search-id`), "amount=2\n"),
		rows("s-2"),
		chromedp.Poll[chromedp.Void](`document.querySelector('input[name="variable"]').value === 'amount'`))
}

// The heatmap's badges and the incidents page name the elements and the
// process by their names, their ids on hover.
func TestTheHeatmapAndTheIncidentsPageNameTheirElements(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	startExpense(t, w, "n-1", map[string]any{"amount": 1})
	startExpense(t, w, "n-2", nil) // an incident at the gateway Check
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/processes/expense", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`.badge.active[aria-label="Review expense: 1 active token(s)"][title="Review expense (id Review): 1 active token(s)"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.badge.incident[aria-label="Amount known?: 1 open incident(s)"][title="Amount known? (id Check): 1 open incident(s)"]`)))
	shown(t, ctx, "heatmap")
	run(t, ctx, chromedp.Navigate(w.base+"/ui/incidents"),
		chromedp.WaitVisible(chromedp.Search(`//td/span[@title="expense v1"]/a[text()="Expense v1"]`)),
		chromedp.WaitVisible(chromedp.Search(`//td/span[@title="Check" and text()="Amount known?"]`)))
	var page struct {
		Incidents []struct {
			ProcessName string `json:"process_name"`
			ElementName string `json:"element_name"`
		} `json:"incidents"`
	}
	w.v1(t, "GET", "/incidents?open=true", nil, &page)
	if len(page.Incidents) != 1 || page.Incidents[0].ProcessName != "Expense" || page.Incidents[0].ElementName != "Amount known?" {
		t.Errorf("open incidents: %+v, want one of Expense at Amount known?", page.Incidents)
	}
}
