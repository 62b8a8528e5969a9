package console

import (
	"bytes"
	"compress/gzip"
	"os"
	"testing"
)

// jsBudget is the most JavaScript the console may ship, gzipped (issue 27).
const jsBudget = 1536 << 10

func TestTheBundleKeepsTheJavaScriptBudget(t *testing.T) {
	js, err := os.ReadFile("dist/app.js")
	if err != nil {
		t.Skip("the console is not built: run make console (make test does)")
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if _, err := w.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if z.Len() > jsBudget {
		t.Errorf("the console's JavaScript is %d bytes gzipped, over its budget of %d", z.Len(), jsBudget)
	}
	t.Logf("%d bytes of JavaScript, %d gzipped (budget %d)", len(js), z.Len(), jsBudget)
}
