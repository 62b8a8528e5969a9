package dmn

import (
	"strings"

	"github.com/sutra-run/worker/internal/xmltree"
)

// The caps of a document, fixed rather than configured, as bpmn's are: a
// decision read again from the store must parse as it did at deploy.
// Modeler files stay far under them (a table of a thousand rules of ten
// columns is some 25,000 elements and a few megabytes).
const (
	// MaxBytes caps the size of a document.
	MaxBytes = 16 << 20
	// MaxDepth caps how deeply a document's elements nest.
	MaxDepth = 100
	// MaxElements caps how many elements a document holds.
	MaxElements = 200_000
)

// Namespaces of the DMN versions read, by the version they name. Elements
// are matched by namespace URI, never by prefix.
var versions = map[string]string{
	"https://www.omg.org/spec/DMN/20191111/MODEL/": "1.3",
	"https://www.omg.org/spec/DMN/20211108/MODEL/": "1.4",
	"https://www.omg.org/spec/DMN/20230324/MODEL/": "1.5",
}

// node is one XML element of the document.
type node = xmltree.Node

// caps are the caps for xmltree.Read.
var caps = xmltree.Caps{Package: "dmn", MaxBytes: MaxBytes, MaxDepth: MaxDepth, MaxElements: MaxElements}

// textOf returns the text of n's <text> child, trimmed; "" when n or the
// child is absent.
func textOf(n *node) string {
	if t := n.Child("text"); t != nil {
		return strings.TrimSpace(t.Text.String())
	}
	return ""
}
