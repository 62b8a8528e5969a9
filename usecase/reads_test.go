package usecase_test

import (
	"errors"
	"testing"

	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
	"github.com/sutra-run/worker/usecase"
)

func TestAnInstanceIsReadSearchedAndCountedInTheStoresTypes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uc, ctx := b.w.UseCases(), t.Context()
	if err := uc.StartInstance(ctx, usecase.Conn{}, "r-1", "tasks", 0, map[string]any{"topic": "read", "timeout": "PT1H"}); err != nil {
		t.Fatal(err)
	}

	d, err := uc.Instance(ctx, "r-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != "active" || d.DefinitionKey != "tasks" || d.HasIncident || len(d.Tokens) != 1 ||
		d.Tokens[0].Element != "Work" || d.Tokens[0].Wait != engine.WaitTask || len(d.Tasks) != 1 || d.Tasks[0].Topic != "read" {
		t.Errorf("instance r-1 reads %+v, want active at Work waiting on its task of topic read", d)
	}
	if _, err := uc.Instance(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("reading an instance that does not exist: %v, want store.ErrNotFound", err)
	}

	p, err := uc.SearchInstances(ctx, store.InstanceFilter{Definition: "tasks", Status: "active", Limit: 10, Scan: 100})
	if err != nil || len(p.Instances) != 1 || p.Instances[0].ID != "r-1" || p.Instances[0].ZeebeKey != d.ZeebeKey {
		t.Errorf("the search found %+v (%v), want r-1 alone", p.Instances, err)
	}

	counts, walked, _, err := uc.ElementStatistics(ctx, "tasks", d.DefinitionVersion, "", 10)
	if err != nil || walked != 1 || len(counts) != 1 || counts[0] != (store.ElementCount{Element: "Work", Active: 1}) {
		t.Errorf("the counts are %+v over %d instances (%v), want one token at Work over 1", counts, walked, err)
	}
	// An unknown version is not an empty count.
	if _, _, _, err := uc.ElementStatistics(ctx, "tasks", d.DefinitionVersion+1, "", 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("counting a version that does not exist: %v, want store.ErrNotFound", err)
	}
}
