package console_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The decisions page draws a deployed decision's table with dmn-js, and an
// evaluation from the page shows the output /v1 answers and marks the rules
// that matched.
func TestTheDecisionsPageDrawsTheTableAndEvaluatesWithInputs(t *testing.T) {
	t.Parallel()
	w := startWorker(t)
	w.env.Deploy(t, "../dmn/testdata/dinner.dmn")
	ctx := browser(t)
	run(t, ctx, signIn(w.base+"/ui/decisions", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`td a[href="/ui/decisions/beverages?version=1"]`)))
	shown(t, ctx, "decisions")

	run(t, ctx, chromedp.Click(chromedp.CSS(`td a[href="/ui/decisions/beverages?version=1"]`)),
		// The table is drawn: a cell of its last rule.
		chromedp.WaitVisible(chromedp.CSS(`.decision-table td[data-row-id="DecisionRule_water"]`)))
	if prefilled := eval[string](t, ctx, `document.getElementById('variables').value`); prefilled == "" {
		t.Error("the variables are not prefilled with the input data")
	}
	run(t, ctx,
		chromedp.SetValue(chromedp.CSS("#variables"), `{"season": "Winter", "guestCount": 6, "guestsWithChildren": true}`),
		chromedp.Click(chromedp.CSS("#evaluate")),
		chromedp.WaitVisible(chromedp.CSS(`#output`)),
		chromedp.WaitVisible(chromedp.CSS(`td.sutra-matched[data-row-id="DecisionRule_water"]`)))
	output := eval[any](t, ctx, `JSON.parse(document.getElementById('output').textContent)`)
	if list, ok := output.([]any); !ok || len(list) != 3 || list[0] != "Bordeaux" || list[1] != "Apple Juice" || list[2] != "Water" {
		t.Errorf("the page's output: %v, want [Bordeaux Apple Juice Water]", output)
	}
	matched := eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll('td.sutra-matched')].map(c => c.dataset.rowId))]`)
	if len(matched) != 3 || matched[0] != "DecisionRule_roastbeef" || matched[1] != "DecisionRule_children" || matched[2] != "DecisionRule_water" {
		t.Errorf("rules marked matched: %v, want roastbeef, children, water", matched)
	}
	shown(t, ctx, "decision")

	// dmn-js's bpmn.io watermark and its lightbox place themselves with
	// style attributes, which the policy admits by hash and no others.
	run(t, ctx, chromedp.Click(chromedp.CSS(".decision-table .bjs-powered-by")),
		chromedp.WaitVisible(chromedp.CSS(".bjs-powered-by-lightbox .notice")))
	if v := eval[[]string](t, ctx, `window.violations`); len(v) != 0 {
		t.Errorf("the watermark's lightbox: the Content-Security-Policy refused %v", v)
	}

	// At 200% zoom (640 CSS pixels) the table scrolls in its box; the page
	// does not widen.
	narrow := browser(t, 640)
	run(t, narrow, signIn(w.base+"/ui/decisions/beverages", adminToken),
		chromedp.WaitVisible(chromedp.CSS(`.decision-table td[data-row-id="DecisionRule_water"]`)))
	if over := eval[float64](t, narrow, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
		t.Errorf("the decision page at 640 CSS pixels: %v pixels wider than the window", over)
	}
}
