package bpmn

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
)

// EmbeddedFormPrefix starts the formKey of a user task whose Camunda Form
// is embedded in the BPMN file, as the Camunda Modeler writes it: the rest
// is the id of a zeebe:userTaskForm of the process.
const EmbeddedFormPrefix = "camunda-forms:bpmn:"

// EmbeddedForm finds, in a deployed BPMN file, the JSON of the Camunda Form
// that formKey names (a zeebe:userTaskForm); ok is false when formKey names
// no embedded form or the file has none of that id. A form deployed apart
// (zeebe:formDefinition formId) is not in the file.
func EmbeddedForm(file []byte, formKey string) (form string, ok bool, err error) {
	id, embedded := strings.CutPrefix(formKey, EmbeddedFormPrefix)
	if !embedded || id == "" {
		return "", false, nil
	}
	d := xml.NewDecoder(bytes.NewReader(file))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		se, isStart := tok.(xml.StartElement)
		if !isStart || se.Name.Space != nsZeebe || se.Name.Local != "userTaskForm" || attr(se, "id") != id {
			continue
		}
		var body struct {
			Text string `xml:",chardata"`
		}
		if err := d.DecodeElement(&body, &se); err != nil {
			return "", false, err
		}
		return strings.TrimSpace(body.Text), true, nil
	}
}

func attr(se xml.StartElement, name string) string {
	for _, a := range se.Attr {
		if a.Name.Space == "" && a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}
