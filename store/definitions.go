package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

type defKey struct {
	key     string
	version int
}

// Deployed names a stored definition.
type Deployed struct {
	Key     string
	Version int
	// Created is false when identical content was already deployed.
	Created bool
}

// Deploy validates xml and stores it as the next version of its process key.
// Deploying content identical to an existing version is a no-op that returns
// that version.
func (s *Store) Deploy(ctx context.Context, xml []byte) (Deployed, error) {
	proc, err := bpmn.Parse(bytes.NewReader(xml))
	if err != nil {
		return Deployed{}, err
	}
	sum := sha256.Sum256(xml)
	checksum := hex.EncodeToString(sum[:])
	key := proc.ID
	// A concurrent deploy of other content can take our version number; the
	// unique key then tells us to read again and retry.
	for attempt := 0; attempt < 5; attempt++ {
		var version int
		var created bool
		err := s.pool.QueryRow(ctx, `
			WITH existing AS (
				SELECT version FROM definitions WHERE key = $1 AND checksum = $2
			), inserted AS (
				INSERT INTO definitions (key, version, checksum, xml)
				SELECT $1, COALESCE((SELECT max(version) FROM definitions WHERE key = $1), 0) + 1, $2, $3
				WHERE NOT EXISTS (SELECT 1 FROM existing)
				RETURNING version
			)
			SELECT version, true FROM inserted
			UNION ALL
			SELECT version, false FROM existing`, key, checksum, string(xml)).Scan(&version, &created)
		if err == nil {
			s.processes.Store(defKey{key, version}, proc)
			return Deployed{Key: key, Version: version, Created: created}, nil
		}
		if err = translate(err, "deploying "+key); !errors.Is(err, ErrConflict) {
			return Deployed{}, err
		}
	}
	return Deployed{}, fmt.Errorf("deploying %s: too many concurrent deploys", key)
}

// Process returns the parsed definition key@version, parsing it once.
func (s *Store) Process(ctx context.Context, key string, version int) (*bpmn.Process, error) {
	k := defKey{key, version}
	if p, ok := s.processes.Load(k); ok {
		return p.(*bpmn.Process), nil
	}
	var xml string
	err := s.pool.QueryRow(ctx, "SELECT xml FROM definitions WHERE key = $1 AND version = $2", key, version).Scan(&xml)
	if err != nil {
		err = translate(err, fmt.Sprintf("loading definition %s@%d", key, version))
		if errors.Is(err, ErrNotFound) {
			return nil, fault.Wrap(fault.UnknownDefinition, err, "definition %s@%d is not deployed", key, version)
		}
		return nil, err
	}
	p, err := bpmn.Parse(bytes.NewReader([]byte(xml)))
	if err != nil {
		return nil, fmt.Errorf("parsing stored definition %s@%d: %w", key, version, err)
	}
	actual, _ := s.processes.LoadOrStore(k, p)
	return actual.(*bpmn.Process), nil
}
