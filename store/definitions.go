package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
)

type defKey struct {
	key     string
	version int
}

// Deployed names a stored process definition or decision.
type Deployed struct {
	// Kind is the file's: KindBPMN (Key is a process id) or KindDMN (Key
	// is a decision id).
	Kind    string
	Key     string
	Version int
	// ZeebeKey is the definition's key for Zeebe clients (its
	// processDefinitionKey).
	ZeebeKey int64
	// Created is false when identical content was already deployed.
	Created bool
	// Name and VersionTag are a decision's.
	Name, VersionTag string
	// DRG names a decision's file as a decision requirements graph, for
	// Zeebe clients.
	DRG DRG
}

// DRG is a deployed DMN file as Zeebe clients see it: its definitions' id
// and name, and the file's key.
type DRG struct {
	ID, Name string
	Key      int64
}

// Deploy validates a BPMN or a DMN file, told apart by its root element
// (FileKind), and stores each executable process or decision in it as the
// next version of its id, in one transaction. The file is stored once
// (deployed_files, by checksum), and each process or decision names it. One
// whose file is identical to the one an existing version came from is not
// stored again: its entry reports that version with Created false.
func (s *Store) Deploy(ctx context.Context, doc []byte) ([]Deployed, error) {
	sum := sha256.Sum256(doc)
	checksum := hex.EncodeToString(sum[:])
	if FileKind(doc) == KindDMN {
		return s.deployDecisions(ctx, doc, checksum)
	}
	procs, err := bpmn.ParseAll(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	deployed := time.Now()
	return retryDeploy(ctx, func() ([]Deployed, error) {
		var out []Deployed
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := storeFile(ctx, tx, checksum, doc); err != nil {
				return err
			}
			for _, proc := range procs {
				d := Deployed{Kind: KindBPMN, Key: proc.ID}
				err := tx.QueryRow(ctx, `
					WITH existing AS (
						-- A version deployed before tags were stored takes its tag now.
						UPDATE definitions SET version_tag = NULLIF($3, '') WHERE key = $1 AND checksum = $2
						RETURNING version, zeebe_key
					), inserted AS (
						INSERT INTO definitions (key, version, checksum, version_tag)
						SELECT $1, COALESCE((SELECT max(version) FROM definitions WHERE key = $1), 0) + 1, $2, NULLIF($3, '')
						WHERE NOT EXISTS (SELECT 1 FROM definitions WHERE key = $1 AND checksum = $2)
						RETURNING version, zeebe_key
					)
					SELECT version, zeebe_key, true FROM inserted
					UNION ALL
					SELECT version, zeebe_key, false FROM existing`, proc.ID, checksum, proc.VersionTag).Scan(&d.Version, &d.ZeebeKey, &d.Created)
				if err != nil {
					return err
				}
				if d.Created {
					for _, el := range proc.MessageStarts() {
						if _, err := tx.Exec(ctx, `INSERT INTO message_starts (message_name, definition_key, definition_version, element_id)
							VALUES ($1, $2, $3, $4)`, el.Message.Name, proc.ID, d.Version, el.ID); err != nil {
							return err
						}
					}
					for _, el := range proc.SignalStarts() {
						if _, err := tx.Exec(ctx, `INSERT INTO signal_starts (signal_name, definition_key, definition_version, element_id)
							VALUES ($1, $2, $3, $4)`, el.Signal.Name, proc.ID, d.Version, el.ID); err != nil {
							return err
						}
					}
					if err := schedule(ctx, tx, proc, d.Version, deployed); err != nil {
						return err
					}
				}
				out = append(out, d)
			}
			return nil
		})
		if err == nil {
			for i, proc := range procs {
				s.processes.Store(defKey{proc.ID, out[i].Version}, proc)
			}
		}
		return out, err
	})
}

// schedule replaces the timer start schedule of proc's key with that of its
// new version: each timer start event's first fire after deployed. A key
// whose new version has no timer start events keeps no schedule.
func schedule(ctx context.Context, tx pgx.Tx, proc *bpmn.Process, version int, deployed time.Time) error {
	if _, err := tx.Exec(ctx, "DELETE FROM timers WHERE definition_key = $1", proc.ID); err != nil {
		return err
	}
	for _, el := range proc.TimerStarts() {
		due, ok, err := engine.NextStart(el, deployed, 0)
		if err != nil {
			return fault.Wrap(fault.BPMNInvalid, err, "process %s, timer start event %s", proc.ID, el.ID)
		}
		if !ok {
			continue
		}
		if _, err := tx.Exec(ctx, `INSERT INTO timers (instance_id, token_id, element_id, due_at, definition_key, definition_version)
			VALUES (sutra_timer_start_id($1, $2, $3, 0), '', $3, $4, $1, $2)`, proc.ID, version, el.ID, due); err != nil {
			return err
		}
	}
	return nil
}

// Process returns the parsed definition key@version, parsing it once.
func (s *Store) Process(ctx context.Context, key string, version int) (*bpmn.Process, error) {
	k := defKey{key, version}
	if p, ok := s.processes.Load(k); ok {
		return p.(*bpmn.Process), nil
	}
	xml, err := s.DefinitionXML(ctx, key, version)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fault.Wrap(fault.UnknownDefinition, err, "definition %s@%d is not deployed", key, version)
		}
		return nil, err
	}
	procs, err := bpmn.ParseAll(bytes.NewReader([]byte(xml)))
	if err != nil {
		return nil, fmt.Errorf("parsing stored definition %s@%d: %w", key, version, err)
	}
	for _, p := range procs {
		if p.ID == key {
			actual, _ := s.processes.LoadOrStore(k, p)
			return actual.(*bpmn.Process), nil
		}
	}
	return nil, fmt.Errorf("stored definition %s@%d holds no process %q", key, version, key)
}

// CalledVersion is the version of process key a call activity of instance
// parent starts under binding (bpmn.CallDefinition): deployment, the
// version deployed in the same file as the parent's own version;
// versionTag, the latest version tagged tag. Neither found is
// fault.UnknownDefinition saying why, which the child reports to its
// parent's call activity as an incident.
func (s *Store) CalledVersion(ctx context.Context, key, binding, tag, parent string) (int, error) {
	var v *int
	var err error
	switch binding {
	case bpmn.BindingDeployment:
		err = s.pool.QueryRow(ctx, `SELECT (SELECT d.version FROM definitions d WHERE d.key = $1 AND d.checksum = p.checksum)
			  FROM instances i JOIN definitions p ON p.key = i.definition_key AND p.version = i.definition_version
			 WHERE i.id = $2`, key, parent).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fault.New(fault.NotFound, "the calling instance %s does not exist", parent)
		}
		if err == nil && v == nil {
			return 0, fault.New(fault.UnknownDefinition, "process %q is not deployed in the same deployment (file) as the calling process (bindingType deployment)", key)
		}
	case bpmn.BindingVersionTag:
		err = s.pool.QueryRow(ctx, `SELECT max(version) FROM definitions WHERE key = $1 AND version_tag = $2`, key, tag).Scan(&v)
		if err == nil && v == nil {
			return 0, fault.New(fault.UnknownDefinition, "no version of process %q tagged %q is deployed (bindingType versionTag)", key, tag)
		}
	default:
		return 0, fault.New(fault.RelayInvalid, "unknown call binding %q", binding)
	}
	if err != nil {
		return 0, translate(err, "finding the called version of "+key)
	}
	return *v, nil
}
