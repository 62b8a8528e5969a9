package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/sutra-run/worker/app"
	"github.com/sutra-run/worker/internal/testkit"
)

// The /v1 routes the web console reads: the instance list's filters, a
// version's per-element counts, and the scope of a token.

// instanceIDs lists the instance ids of a GET /v1/instances answer, and its cursor.
func (b *adminBundle) instanceIDs(t *testing.T, q url.Values) ([]string, any) {
	t.Helper()
	status, out := b.do(t, "GET", "/instances?"+q.Encode(), nil)
	if status != http.StatusOK {
		t.Fatalf("GET /instances?%s: %d %v", q.Encode(), status, out)
	}
	list, _ := asList(out["instances"])
	var ids []string
	for _, i := range list {
		ids = append(ids, fmt.Sprint(i["instance_id"]))
	}
	return ids, out["next"]
}

func TestTheInstanceListFiltersByVersionVariableAndCreationTime(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	start := func(id string, amount any) {
		if status, out := b.do(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": id,
			"variables": map[string]any{"orderId": id, "amount": amount}}); status != http.StatusCreated {
			t.Fatalf("start %s: %d %v", id, status, out)
		}
	}
	start("o-1", 5)
	start("o-2", 50)
	b.env.Deploy(t, "testdata/shop-v2.bpmn")
	start("o-3", 5)
	start("o-4", "5")
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	cases := []struct {
		q    url.Values
		want []string
	}{
		{url.Values{"definition": {"shop"}}, []string{"o-1", "o-2", "o-3", "o-4"}},
		{url.Values{"definition": {"shop"}, "version": {"1"}}, []string{"o-1", "o-2"}},
		{url.Values{"variable": {"amount"}, "value": {"5"}}, []string{"o-1", "o-3"}},
		{url.Values{"variable": {"amount"}, "value": {`"5"`}}, []string{"o-4"}},
		{url.Values{"definition": {"shop"}, "version": {"2"}, "variable": {"amount"}, "value": {"5"}}, []string{"o-3"}},
		{url.Values{"definition": {"shop"}, "created_before": {later}}, []string{"o-1", "o-2", "o-3", "o-4"}},
		{url.Values{"definition": {"shop"}, "created_after": {later}}, nil},
		{url.Values{"variable": {"nope"}, "value": {"5"}}, nil},
	}
	for _, c := range cases {
		if got, _ := b.instanceIDs(t, c.q); !slices.Equal(got, c.want) {
			t.Errorf("GET /instances?%s: %v, want %v", c.q.Encode(), got, c.want)
		}
	}
	// The cursor pages through the filtered list.
	q := url.Values{"variable": {"amount"}, "value": {"5"}, "limit": {"1"}}
	first, next := b.instanceIDs(t, q)
	q.Set("after", fmt.Sprint(next))
	second, _ := b.instanceIDs(t, q)
	if !slices.Equal(first, []string{"o-1"}) || !slices.Equal(second, []string{"o-3"}) {
		t.Errorf("pages of one: %v then %v, want [o-1] then [o-3]", first, second)
	}
	for _, bad := range []string{"version=0", "variable=amount&value=not-json", "value=5", "created_after=yesterday"} {
		if status, _ := b.do(t, "GET", "/instances?"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("GET /instances?%s: %d, want 400", bad, status)
		}
	}
}

func TestAnInstanceListPageEndsWhereItsWalkEnds(t *testing.T) {
	t.Parallel()
	// Each page walks 2 instances at most to check its filter.
	b := setupAdmin(t, nil, func(c *app.Config) { c.API.MaxScan = 2 })
	for i, amount := range []int{5, 6, 7, 5, 6} {
		id := fmt.Sprintf("o-%d", i+1)
		if status, out := b.do(t, "POST", "/instances", map[string]any{"definition": "shop", "instance_id": id,
			"variables": map[string]any{"amount": amount}}); status != http.StatusCreated {
			t.Fatalf("start %s: %d %v", id, status, out)
		}
	}
	q := url.Values{"variable": {"amount"}, "value": {"5"}}
	var pages [][]string
	for {
		ids, next := b.instanceIDs(t, q)
		pages = append(pages, ids)
		if next == nil || len(pages) > 5 {
			break
		}
		q.Set("after", fmt.Sprint(next))
	}
	// Walks: o-1 o-2 | o-3 o-4 | o-5 (the last, short of the bound).
	want := [][]string{{"o-1"}, {"o-4"}, nil}
	if !slices.EqualFunc(pages, want, slices.Equal[[]string]) {
		t.Errorf("pages: %v, want %v", pages, want)
	}
	// Unfiltered, a page is not bounded by the walk.
	if ids, _ := b.instanceIDs(t, url.Values{"definition": {"shop"}}); len(ids) != 5 {
		t.Errorf("unfiltered: %v, want all 5", ids)
	}
}

func TestElementStatisticsCountTheTokensOfActiveInstancesAndOpenIncidents(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	b.startShop(t, "o-1")
	b.startShop(t, "o-2")
	b.startShop(t, "o-3")
	if status, out := b.do(t, "POST", "/instances/o-3/cancel", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, out)
	}
	// stats sums the pages of one instance each, as the console does.
	stats := func() map[string][2]float64 {
		t.Helper()
		m := map[string][2]float64{}
		after := ""
		for pages := 0; ; pages++ {
			status, out := b.do(t, "GET", "/definitions/shop/versions/1/statistics?limit=1&after="+after, nil)
			if status != http.StatusOK || pages > 3 {
				t.Fatalf("statistics page %d: %d %v", pages, status, out)
			}
			list, _ := asList(out["elements"])
			for _, e := range list {
				c := m[fmt.Sprint(e["element"])]
				m[fmt.Sprint(e["element"])] = [2]float64{c[0] + e["active"].(float64), c[1] + e["incidents"].(float64)}
			}
			if out["next"] == nil {
				return m
			}
			after = fmt.Sprint(out["next"])
		}
	}
	if got := stats(); len(got) != 1 || got["Event_Paid"] != [2]float64{2, 0} {
		t.Errorf("two waiting for their payment, one cancelled: %v, want Event_Paid 2 active", got)
	}
	// o-2 is paid and shipped without an amount: its gateway stops in an
	// incident.
	b.pub.Publish(testkit.Relay{MessageID: "paid", Body: map[string]any{"instance_id": "o-2", "message": "payment-received"}})
	b.applied(t, "paid")
	task := b.fetch(t, "w", "ship", 1, time.Minute, 0)[0]
	if status, _, body := b.call(t, "/external-task/"+task.ID+"/complete", map[string]any{"workerId": "w"}); status != 204 {
		t.Fatalf("complete: %d %s", status, body)
	}
	b.applied(t, "task:"+task.ID+":1")
	if got := stats(); len(got) != 2 || got["Event_Paid"] != [2]float64{1, 0} || got["Gateway_Check"] != [2]float64{1, 1} {
		t.Errorf("one waiting, one stopped at the gateway: %v", got)
	}
	if status, _ := b.do(t, "GET", "/definitions/shop/versions/7/statistics", nil); status != http.StatusNotFound {
		t.Errorf("statistics of a version never deployed: %d, want 404", status)
	}
}

func TestWhoAmINamesTheScopeTheTokenOpens(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for _, c := range []struct {
		token  string
		status int
		scope  string
	}{{adminToken, 200, "admin"}, {token, 200, "tasks"}, {"wrong", 401, ""}} {
		req, _ := http.NewRequest("GET", b.v1+"/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Scope string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != c.status || out.Scope != c.scope {
			t.Errorf("whoami with %q: %d %q, want %d %q", c.token, resp.StatusCode, out.Scope, c.status, c.scope)
		}
	}
}

// The instance list sorts by start or end time, newest first, searches by
// business key and by the element a token waits at, and counts what its
// filters match: exactly up to store.InstanceCountCap walked, else an
// estimate it says is one.
func TestTheInstanceListSortsByStartOrEndSearchesAndCounts(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil, nil)
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
		b.startShop(t, id)
	}
	for _, id := range []string{"o-2", "o-3"} {
		if status, out := b.do(t, "POST", "/instances/"+id+"/cancel", nil); status != http.StatusOK {
			t.Fatalf("cancel %s: %d %v", id, status, out)
		}
	}
	// What a start by a message with a correlation key leaves on the row.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "UPDATE instances SET start_correlation_key = 'order-1' WHERE id = 'o-1'"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		q    url.Values
		want []string
	}{
		{url.Values{"sort": {"start"}}, []string{"o-4", "o-3", "o-2", "o-1"}},
		{url.Values{"sort": {"start"}, "order": {"asc"}}, []string{"o-1", "o-2", "o-3", "o-4"}},
		{url.Values{"sort": {"end"}}, []string{"o-3", "o-2"}},
		{url.Values{"sort": {"end"}, "order": {"asc"}}, []string{"o-2", "o-3"}},
		{url.Values{"sort": {"start"}, "status": {"active"}}, []string{"o-4", "o-1"}},
		{url.Values{"key": {"order-1"}}, []string{"o-1"}},
		{url.Values{"key": {"order-2"}}, nil},
		{url.Values{"waiting_at": {"Event_Paid"}}, []string{"o-1", "o-4"}},
		{url.Values{"waiting_at": {"Task_Ship"}}, nil},
		{url.Values{"sort": {"start"}, "created_after": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, nil},
	}
	for _, c := range cases {
		if got, _ := b.instanceIDs(t, c.q); !slices.Equal(got, c.want) {
			t.Errorf("GET /instances?%s: %v, want %v", c.q.Encode(), got, c.want)
		}
	}
	// A time order's cursor pages on: newest first, one a page.
	q := url.Values{"sort": {"start"}, "limit": {"1"}}
	var pages []string
	for len(pages) < 6 {
		ids, next := b.instanceIDs(t, q)
		pages = append(pages, ids...)
		if next == nil {
			break
		}
		q.Set("after", fmt.Sprint(next))
	}
	if want := []string{"o-4", "o-3", "o-2", "o-1"}; !slices.Equal(pages, want) {
		t.Errorf("pages of one by start: %v, want %v", pages, want)
	}
	// Ended instances carry their end and how long they ran.
	_, out := b.do(t, "GET", "/instances?sort=end&limit=1", nil)
	list, _ := asList(out["instances"])
	if len(list) != 1 || list[0]["ended_at"] == nil || list[0]["duration_ms"].(float64) < 0 {
		t.Errorf("an ended instance: %v, want its ended_at and duration_ms", list)
	}
	total := func(q string) map[string]any {
		t.Helper()
		status, out := b.do(t, "GET", "/instances?total=true&"+q, nil)
		if status != http.StatusOK {
			t.Fatalf("GET /instances?total=true&%s: %d %v", q, status, out)
		}
		n, _ := out["total"].(map[string]any)
		return n
	}
	if n := total("definition=shop"); n["count"] != 4.0 || n["exact"] != true {
		t.Errorf("total of shop: %v, want 4 exactly", n)
	}
	if n := total("status=active&sort=start"); n["count"] != 2.0 || n["exact"] != true {
		t.Errorf("total of the active: %v, want 2 exactly", n)
	}
	if n := total("sort=end"); n["count"] != 2.0 || n["exact"] != true {
		t.Errorf("total of the ended: %v, want 2 exactly", n)
	}
	if _, ok := out["total"]; ok {
		t.Errorf("a list not asked its total answered %v", out["total"])
	}
	// Past the cap, the count is an estimate and says so.
	if _, err := b.env.DB.Exec(testkit.Ctx(t), `INSERT INTO instances (id, definition_key, definition_version, status, version)
		SELECT 'seed-' || n, 'shop', 1, 'completed', 1 FROM generate_series(1, 30000) n`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.env.DB.Exec(testkit.Ctx(t), "ANALYZE instances"); err != nil {
		t.Fatal(err)
	}
	if n := total("definition=shop&status=completed"); n["exact"] != false || n["count"].(float64) < 25000 || n["count"].(float64) > 35000 {
		t.Errorf("total of 30000 completed: %v, want an estimate near 30000", n)
	}
	if ended := b.env.Int(t, "SELECT count(*) FROM instances WHERE status = 'completed' AND ended_at IS NOT NULL"); ended != 30000 {
		t.Errorf("%d of 30000 instances created ended have ended_at", ended)
	}
	for _, bad := range []string{"sort=nope", "order=up", "sort=start&after=o-1", "total=maybe"} {
		if status, _ := b.do(t, "GET", "/instances?"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("GET /instances?%s: %d, want 400", bad, status)
		}
	}
}
