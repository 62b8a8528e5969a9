package bpmn_test

import (
	"os"
	"testing"

	"github.com/sutra-run/worker/bpmn"
)

func TestEmbeddedFormFindsTheUserTaskFormItsKeyNames(t *testing.T) {
	file, err := os.ReadFile("../examples/claim.bpmn")
	if err != nil {
		t.Fatal(err)
	}
	form, ok, err := bpmn.EmbeddedForm(file, "camunda-forms:bpmn:userTaskForm_manualPayout")
	want := `{"components":[{"key":"paymentRef","label":"Payment reference","type":"textfield"}],"type":"default"}`
	if err != nil || !ok || form != want {
		t.Errorf("the embedded form: %q %v %v, want %q", form, ok, err, want)
	}
	for _, key := range []string{"camunda-forms:bpmn:nope", "userTaskForm_manualPayout", "camunda-forms:bpmn:", "claim-assessment"} {
		if form, ok, err := bpmn.EmbeddedForm(file, key); ok || err != nil {
			t.Errorf("formKey %q: %q %v %v, want no form", key, form, ok, err)
		}
	}
	if _, _, err := bpmn.EmbeddedForm([]byte("<definitions><unclosed"), "camunda-forms:bpmn:x"); err == nil {
		t.Error("a broken file: no error")
	}
}
