package engine

import (
	"encoding/json"
	"reflect"
	"testing"
)

// An instance's state written by a newer release, with fields this one
// does not know (on the state and on a token), reads as it would without
// them: releases run side by side (docs/operations.md, "Upgrading").
func TestStateFromANewerReleaseReadsWithItsUnknownFieldsIgnored(t *testing.T) {
	known := `{"tokens":[{"id":"t1","el":"Pack"}],"seq":1}`
	newer := `{"tokens":[{"id":"t1","el":"Pack","lease":"x"}],"seq":1,"format":2}`
	var want, got State
	if err := json.Unmarshal([]byte(known), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(newer), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("state of a newer release = %+v, %v; want %+v", got, err, want)
	}
}
