package dmn

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
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
type node struct {
	name xml.Name
	// attr holds the attributes, unqualified ones by their name and
	// qualified ones as "{namespace}name".
	attr map[string]string
	kids []*node
	text strings.Builder
}

// child returns the first child named local in the document's namespace.
func (n *node) child(local string) *node {
	for _, k := range n.kids {
		if k.name.Local == local && k.name.Space == n.name.Space {
			return k
		}
	}
	return nil
}

// children returns the children named local in the document's namespace.
func (n *node) children(local string) []*node {
	var out []*node
	for _, k := range n.kids {
		if k.name.Local == local && k.name.Space == n.name.Space {
			out = append(out, k)
		}
	}
	return out
}

// textOf returns the text of n's <text> child, trimmed; "" when absent.
func (n *node) textOf() string {
	if n == nil {
		return ""
	}
	if t := n.child("text"); t != nil {
		return strings.TrimSpace(t.text.String())
	}
	return ""
}

// readTree reads the whole document into a tree, refusing one past
// MaxBytes, MaxDepth or MaxElements as soon as it gets there.
func readTree(r io.Reader) (*node, error) {
	lr := &io.LimitedReader{R: r, N: MaxBytes + 1}
	d := xml.NewDecoder(lr)
	var root *node
	var stack []*node
	elements := 0
	for {
		tok, err := d.Token()
		if lr.N <= 0 {
			return nil, fmt.Errorf("the document is larger than %d bytes (the parser's cap, dmn.MaxBytes)", MaxBytes)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if elements++; elements > MaxElements {
				return nil, fmt.Errorf("the document holds more than %d elements (the parser's cap, dmn.MaxElements)", MaxElements)
			}
			if len(stack) >= MaxDepth {
				return nil, fmt.Errorf("<%s> nests deeper than %d elements (the parser's cap, dmn.MaxDepth)", t.Name.Local, MaxDepth)
			}
			n := &node{name: t.Name, attr: map[string]string{}}
			for _, a := range t.Attr {
				if a.Name.Space == "" {
					n.attr[a.Name.Local] = a.Value
				} else {
					n.attr["{"+a.Name.Space+"}"+a.Name.Local] = a.Value
				}
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, errors.New("more than one root element")
				}
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.kids = append(parent.kids, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(t)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no root element")
	}
	return root, nil
}
