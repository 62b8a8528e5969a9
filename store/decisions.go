package store

import (
	"time"

	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/dmn"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/fault"
)

// The kinds of a deployed file, told apart by its root element.
const (
	KindBPMN = "bpmn"
	KindDMN  = "dmn"
)

// FileKind tells a DMN file (the definitions of DMN 1.3 to 1.5) from
// anything else, which is deployed as BPMN and refused there if it is not.
func FileKind(doc []byte) string {
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := d.Token()
		if err != nil {
			return KindBPMN
		}
		if se, ok := tok.(xml.StartElement); ok {
			if dmn.IsDMN(se.Name.Space, se.Name.Local) {
				return KindDMN
			}
			return KindBPMN
		}
	}
}

// deployDecisions stores each decision of a DMN file as the next version
// of its decision id, in one transaction, as Deploy does processes: the
// file once, by checksum; a decision whose file is identical to the one an
// existing version came from is not stored again (Created false).
func (s *Store) deployDecisions(ctx context.Context, doc []byte, checksum string) ([]Deployed, error) {
	defs, err := dmn.Parse(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	if len(defs.Decisions) == 0 {
		return nil, fault.New(fault.DMNInvalid, "definitions %q hold no decision", defs.ID)
	}
	return retryDeploy(ctx, func() ([]Deployed, error) {
		var out []Deployed
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := storeFile(ctx, tx, checksum, doc); err != nil {
				return err
			}
			drg := DRG{ID: defs.ID, Name: defs.Name}
			if err := tx.QueryRow(ctx, `SELECT zeebe_key FROM deployed_files WHERE checksum = $1`, checksum).Scan(&drg.Key); err != nil {
				return err
			}
			for _, dec := range defs.Decisions {
				d := Deployed{Kind: KindDMN, Key: dec.ID, Name: dec.Name, VersionTag: dec.VersionTag, DRG: drg}
				err := tx.QueryRow(ctx, `
					WITH existing AS (
						SELECT version, zeebe_key FROM decisions WHERE decision_id = $1 AND checksum = $2
					), inserted AS (
						INSERT INTO decisions (decision_id, version, checksum, name, version_tag)
						SELECT $1, COALESCE((SELECT max(version) FROM decisions WHERE decision_id = $1), 0) + 1, $2, $3, NULLIF($4, '')
						WHERE NOT EXISTS (SELECT 1 FROM existing)
						RETURNING version, zeebe_key
					)
					SELECT version, zeebe_key, true FROM inserted
					UNION ALL
					SELECT version, zeebe_key, false FROM existing`, dec.ID, checksum, dec.Name, dec.VersionTag).Scan(&d.Version, &d.ZeebeKey, &d.Created)
				if err != nil {
					return err
				}
				out = append(out, d)
			}
			return nil
		})
		if err == nil {
			s.drgs.Store(checksum, defs)
		}
		return out, err
	})
}

// drg returns the parsed DMN file of checksum, parsing it once.
func (s *Store) drg(ctx context.Context, checksum string) (*dmn.Definitions, error) {
	if d, ok := s.drgs.Load(checksum); ok {
		return d.(*dmn.Definitions), nil
	}
	var doc string
	if err := s.pool.QueryRow(ctx, `SELECT xml FROM deployed_files WHERE checksum = $1`, checksum).Scan(&doc); err != nil {
		return nil, translate(err, "reading a deployed DMN file")
	}
	defs, err := dmn.Parse(strings.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("parsing stored DMN file %s: %w", checksum, err)
	}
	actual, _ := s.drgs.LoadOrStore(checksum, defs)
	return actual.(*dmn.Definitions), nil
}

// CalledDecisions finds the deployed decisions the business rule tasks of
// proc (deployed as version) call, each by its binding, in one round trip
// (and one more for a file not parsed yet): latest, the latest version;
// versionTag, the latest version with that tag; deployment, the latest
// version deployed no later than proc's version. A reference nothing
// matches is in the map with the reason (engine.Decision.Missing).
func (s *Store) CalledDecisions(ctx context.Context, proc *bpmn.Process, version int) (engine.Decisions, error) {
	refs := proc.CalledDecisions()
	ids, bindings, tags := make([]string, len(refs)), make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		ids[i], bindings[i], tags[i] = r.DecisionID, r.Binding, r.VersionTag
	}
	rows, err := s.pool.Query(ctx, `
		SELECT r.i, d.version, d.checksum
		  FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(id, binding, tag, i)
		  JOIN LATERAL (
			SELECT version, checksum FROM decisions d
			 WHERE d.decision_id = r.id
			   AND (r.binding <> 'versionTag' OR d.version_tag = r.tag)
			   AND (r.binding <> 'deployment'
			        OR d.deployed_at <= (SELECT deployed_at FROM definitions WHERE key = $4 AND version = $5))
			 ORDER BY d.version DESC LIMIT 1
		  ) d ON true`, ids, bindings, tags, proc.ID, version)
	if err != nil {
		return nil, translate(err, "finding called decisions")
	}
	type found struct {
		i        int
		version  int
		checksum string
	}
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
		var f found
		return f, r.Scan(&f.i, &f.version, &f.checksum)
	})
	if err != nil {
		return nil, translate(err, "finding called decisions")
	}
	out := make(engine.Decisions, len(refs))
	for _, r := range refs {
		out[r] = engine.Decision{Missing: missing(r, proc.ID, version)}
	}
	for _, h := range hits {
		defs, err := s.drg(ctx, h.checksum)
		if err != nil {
			return nil, err
		}
		out[refs[h.i-1]] = engine.Decision{Definitions: defs, Version: h.version}
	}
	return out, nil
}

// missing says why no deployed decision matches r.
func missing(r bpmn.DecisionRef, process string, version int) string {
	switch r.Binding {
	case bpmn.BindingVersionTag:
		return fmt.Sprintf("no version of decision %q tagged %q is deployed", r.DecisionID, r.VersionTag)
	case bpmn.BindingDeployment:
		return fmt.Sprintf("no version of decision %q was deployed before process %s version %d (bindingType deployment)", r.DecisionID, process, version)
	}
	return fmt.Sprintf("no decision %q is deployed", r.DecisionID)
}

// DecisionRef names a deployed decision version: by Key (its decisionKey
// for Zeebe clients), or by ID and Version (0: the latest).
type DecisionRef struct {
	ID      string
	Version int
	Key     int64
}

// FoundDecision is a deployed decision version and the DMN file it came
// from.
type FoundDecision struct {
	Definitions *dmn.Definitions
	ID, Name    string
	Version     int
	Key         int64
	// DRG is the file as a decision requirements graph.
	DRG DRG
	// Keys are the version and key of each decision deployed from the same
	// file, by decision id: how an evaluation names the decisions it
	// required.
	Keys map[string]DecisionKey
}

// DecisionKey is a decision version's number and key.
type DecisionKey struct {
	Version int
	Key     int64
}

// FindDecision finds the deployed decision ref names, with the keys of the
// decisions of its file. ErrNotFound when there is none.
func (s *Store) FindDecision(ctx context.Context, ref DecisionRef) (FoundDecision, error) {
	var f FoundDecision
	var checksum string
	var ids []string
	var versions []int
	var keys []int64
	err := s.pool.QueryRow(ctx, `
		SELECT d.decision_id, d.name, d.version, d.zeebe_key, d.checksum, f.zeebe_key,
		       array_agg(s.decision_id ORDER BY s.decision_id), array_agg(s.version ORDER BY s.decision_id),
		       array_agg(s.zeebe_key ORDER BY s.decision_id)
		  FROM (SELECT * FROM decisions
		         WHERE CASE WHEN $1::bigint <> 0 THEN zeebe_key = $1 ELSE decision_id = $2 AND ($3 = 0 OR version = $3) END
		         ORDER BY version DESC LIMIT 1) d
		  JOIN deployed_files f ON f.checksum = d.checksum
		  JOIN decisions s ON s.checksum = d.checksum
		 GROUP BY d.decision_id, d.name, d.version, d.zeebe_key, d.checksum, f.zeebe_key`, ref.Key, ref.ID, ref.Version).
		Scan(&f.ID, &f.Name, &f.Version, &f.Key, &checksum, &f.DRG.Key, &ids, &versions, &keys)
	if err != nil {
		return f, translate(err, fmt.Sprintf("reading decision %+v", ref))
	}
	if f.Definitions, err = s.drg(ctx, checksum); err != nil {
		return f, err
	}
	f.DRG.ID, f.DRG.Name = f.Definitions.ID, f.Definitions.Name
	f.Keys = make(map[string]DecisionKey, len(ids))
	for i, id := range ids {
		f.Keys[id] = DecisionKey{Version: versions[i], Key: keys[i]}
	}
	return f, nil
}

// DecisionXML returns the DMN file version of decision id was deployed
// from. ErrNotFound when there is none.
func (s *Store) DecisionXML(ctx context.Context, id string, version int) (string, error) {
	var xml string
	err := s.pool.QueryRow(ctx, `SELECT f.xml FROM decisions d JOIN deployed_files f ON f.checksum = d.checksum
		WHERE d.decision_id = $1 AND d.version = $2`, id, version).Scan(&xml)
	return xml, translate(err, fmt.Sprintf("reading decision %s@%d", id, version))
}

// DecisionFilter selects a page of GET /v1/decisions: the decisions after
// AfterID version AfterVersion (none: from the first), by id, then version.
type DecisionFilter struct {
	Limit        int
	AfterID      string
	AfterVersion int
}

// DecisionVersion is one deployed version of a decision.
type DecisionVersion struct {
	DecisionID string
	Name       string
	Version    int
	VersionTag *string
	DeployedAt time.Time
}

// ListDecisions lists deployed decisions by id, then version.
func (s *Store) ListDecisions(ctx context.Context, f DecisionFilter) ([]DecisionVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT decision_id, name, version, version_tag, deployed_at FROM decisions
		WHERE $1 = '' OR (decision_id, version) > ($1, $2) ORDER BY decision_id, version LIMIT $3`, f.AfterID, f.AfterVersion, f.Limit)
	if err != nil {
		return nil, translate(err, "listing decisions")
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DecisionVersion, error) {
		var d DecisionVersion
		return d, r.Scan(&d.DecisionID, &d.Name, &d.Version, &d.VersionTag, &d.DeployedAt)
	})
	return list, translate(err, "listing decisions")
}

// retryDeploy runs one deploy transaction again when a concurrent deploy of
// other content took a version number (the unique key tells).
func retryDeploy(ctx context.Context, try func() ([]Deployed, error)) ([]Deployed, error) {
	for range 5 {
		out, err := try()
		if err == nil {
			return out, nil
		}
		if fault.Code(err) != "" {
			return nil, err
		}
		if err = translate(err, "deploying"); !errors.Is(err, ErrConflict) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("deploying: too many concurrent deploys")
}

// storeFile stores a deployed file once, by its checksum.
func storeFile(ctx context.Context, tx pgx.Tx, checksum string, doc []byte) error {
	_, err := tx.Exec(ctx, `INSERT INTO deployed_files (checksum, xml) VALUES ($1, $2) ON CONFLICT DO NOTHING`, checksum, string(doc))
	return err
}
