package bpmn

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Namespaces of the elements the parser reads; everything is matched by
// namespace URI, never by prefix, because files choose their own prefixes.
const (
	nsBPMN  = "http://www.omg.org/spec/BPMN/20100524/MODEL"
	nsZeebe = "http://camunda.org/schema/zeebe/1.0"
	nsXSI   = "http://www.w3.org/2001/XMLSchema-instance"
	// nsModeler carries Camunda Modeler's executionPlatform attribute.
	nsModeler = "http://camunda.org/schema/modeler/1.0"
	// nsCamunda7 is the extension namespace of Camunda 7 files.
	nsCamunda7 = "http://camunda.org/schema/1.0/bpmn"
)

// node is one XML element. The parser walks a tree rather than decoding into
// structs so that it can refuse any element it does not know, by name and id.
type node struct {
	name  xml.Name
	attrs []xml.Attr
	kids  []*node
	text  strings.Builder
}

// attr returns the value of the unqualified attribute local, or "".
func (n *node) attr(local string) string {
	for _, a := range n.attrs {
		if a.Name.Space == "" && a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

func (n *node) is(space, local string) bool {
	return n.name.Space == space && n.name.Local == local
}

// The caps of a document, fixed rather than configured: a definition read
// again from the store must parse as it did at deploy. Modeler files stay far
// under both (nested subprocesses rarely pass depth 20; a file of 300
// processes with their diagrams holds some 10,000 elements), while the tree
// of a file past them costs memory out of proportion to its bytes (a 3.5 MB
// file nested 500,000 deep held 256 MB).
const (
	// MaxDepth caps how deeply a document's elements nest.
	MaxDepth = 100
	// MaxElements caps how many elements a document holds.
	MaxElements = 100_000
)

// readTree reads the whole document into a tree, refusing one past MaxDepth
// or MaxElements as soon as it gets there.
func readTree(r io.Reader) (*node, error) {
	d := xml.NewDecoder(r)
	var root *node
	var stack []*node
	elements := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if elements++; elements > MaxElements {
				return nil, fmt.Errorf("the document holds more than %d elements (the parser's cap, bpmn.MaxElements)", MaxElements)
			}
			if len(stack) >= MaxDepth {
				return nil, fmt.Errorf("<%s> nests deeper than %d elements (the parser's cap, bpmn.MaxDepth)", t.Name.Local, MaxDepth)
			}
			n := &node{name: t.Name, attrs: t.Attr}
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
