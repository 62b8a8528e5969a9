package console_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"testing"
)

// jsBudget is the most JavaScript the console may ship, gzipped (issue 27).
const jsBudget = 1_500_000

func TestTheConsolesJavaScriptStaysWithinItsBudget(t *testing.T) {
	js, err := os.ReadFile("dist/app.js")
	if err != nil {
		t.Skip("the console is not built: run make console (make test does)")
	}
	var gz bytes.Buffer
	w, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("dist/app.js: %d bytes, %d gzipped", len(js), gz.Len())
	if gz.Len() > jsBudget {
		t.Errorf("dist/app.js is %d bytes gzipped, over the budget of %d", gz.Len(), jsBudget)
	}
}
