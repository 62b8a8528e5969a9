package admin

import (
	"strconv"
	"time"

	"github.com/sutra-run/worker/api/admin/wire"
	"github.com/sutra-run/worker/engine"
	"github.com/sutra-run/worker/store"
)

// What the admin API shows of the store's reads: each store type mapped to
// its wire type, once. A list is [], never null.

// mapAll maps each item of list with f.
func mapAll[T, U any](list []T, f func(T) U) []U {
	out := make([]U, len(list))
	for i, v := range list {
		out[i] = f(v)
	}
	return out
}

func definitionRef(key *string, version *int) *wire.DefinitionRef {
	if key == nil || version == nil {
		return nil
	}
	return &wire.DefinitionRef{Key: *key, Version: *version}
}

// incidentOf is what the admin API shows of an incident.
func incidentOf(i store.Incident) wire.Incident {
	return wire.Incident{ID: i.ID, ZeebeKey: i.ID, InstanceID: i.InstanceID, Token: i.Token, Element: i.Element, Code: i.Code,
		Message: i.Message, ErrorMessage: i.ErrorMessage, ErrorDetails: i.ErrorDetails, CreatedAt: i.CreatedAt, ResolvedAt: i.ResolvedAt,
		Definition: definitionRef(i.DefinitionKey, i.DefinitionVersion)}
}

func tokenOf(t store.ActiveToken) wire.Token {
	return wire.Token{ID: t.ID, Element: t.Element, Wait: string(t.Wait), Scope: t.Scope, CalledInstance: t.CalledInstance}
}

// instanceOf is GET /v1/instances/{id}'s answer.
func instanceOf(d store.InstanceDetail) wire.Instance {
	in := wire.Instance{ID: d.ID, ZeebeKey: d.ZeebeKey, Definition: wire.DefinitionRef{Key: d.DefinitionKey, Version: d.DefinitionVersion},
		Status: d.Status, Version: d.Version, Variables: d.Variables, Tokens: mapAll(d.Tokens, tokenOf),
		ParentID: d.ParentID, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	in.Compensable = mapAll(d.Compensable, func(c engine.Compensable) wire.Compensable {
		return wire.Compensable{Element: c.Element, Scope: c.Scope, In: c.In, Times: c.Times}
	})
	in.Waits = wire.Waits{
		Subscriptions: mapAll(d.Subscriptions, func(s store.MessageSubscription) wire.Subscription {
			return wire.Subscription{Token: s.Token, Element: s.Element, Message: s.Message, CorrelationKey: s.CorrelationKey, CreatedAt: s.CreatedAt}
		}),
		Signals: mapAll(d.SignalSubscriptions, func(s store.SignalSubscription) wire.SignalSubscription {
			return wire.SignalSubscription{Token: s.Token, Element: s.Element, Signal: s.Signal, CreatedAt: s.CreatedAt}
		}),
		Timers: mapAll(d.Timers, func(t store.ArmedTimer) wire.Timer {
			return wire.Timer{Token: t.Token, Element: t.Element, DueAt: t.DueAt, Attempts: t.Attempts}
		}),
		Tasks: mapAll(d.Tasks, func(t store.OpenTask) wire.Task {
			id := strconv.FormatInt(t.ID, 10)
			return wire.Task{ID: id, ZeebeKey: id, Token: t.Token, Element: t.Element, Topic: t.Topic, UserTask: t.UserTask,
				Retries: t.Retries, LockedBy: t.LockedBy, LockExpiresAt: t.LockExpiresAt}
		}),
	}
	in.Incidents = mapAll(d.Incidents, incidentOf)
	in.CalledIncidents = mapAll(d.CalledIncidents, func(c store.CalledIncident) wire.CalledIncident {
		return wire.CalledIncident{Incident: incidentOf(c.Incident), CalledBy: c.CalledBy}
	})
	if d.Claim != nil {
		in.Claim = &wire.Claim{Owner: d.Claim.Owner, AgeSeconds: d.Claim.Age.Seconds()}
	}
	return in
}

func instanceSummaryOf(i store.InstanceSummary) wire.InstanceSummary {
	return wire.InstanceSummary{ID: i.ID, ZeebeKey: i.ZeebeKey, Definition: wire.DefinitionRef{Key: i.DefinitionKey, Version: i.DefinitionVersion},
		Status: i.Status, Version: i.Version, HasIncident: i.HasIncident, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt,
		EndedAt: i.EndedAt, DurationMS: durationMS(i.CreatedAt, i.EndedAt)}
}

// durationMS is how long an instance ran: to its end, or until now while it
// runs.
func durationMS(created time.Time, ended *time.Time) int64 {
	if ended != nil {
		return ended.Sub(created).Milliseconds()
	}
	return max(time.Since(created).Milliseconds(), 0)
}

func definitionVersionsOf(d store.DefinitionVersions) wire.DefinitionVersions {
	return wire.DefinitionVersions{Key: d.Key, Versions: d.Versions, Latest: d.Latest,
		ZeebeKeys: mapAll(d.ZeebeKeys, func(k int64) string { return strconv.FormatInt(k, 10) })}
}

func decisionOf(d store.DecisionVersion) wire.Decision {
	return wire.Decision{DecisionID: d.DecisionID, Name: d.Name, Version: d.Version, VersionTag: d.VersionTag, DeployedAt: d.DeployedAt}
}

func elementStatisticsOf(e store.ElementCount) wire.ElementStatistics {
	return wire.ElementStatistics{Element: e.Element, Active: e.Active, Incidents: e.Incidents}
}

func migrationOf(m store.MigrationProgress) wire.Migration {
	return wire.Migration{ID: m.ID, Definition: m.Definition, FromVersion: m.FromVersion, ToVersion: m.ToVersion, State: m.State,
		Total: m.Total, Migrated: m.Migrated, Retrying: m.Retrying, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Refused: mapAll(m.Refused, func(r store.MigrationRefusal) wire.Refusal {
			return wire.Refusal{InstanceID: r.InstanceID, Code: r.Code, Detail: r.Detail}
		})}
}

func batchOf(b store.BatchProgress) wire.Batch {
	return wire.Batch{ID: b.ID, Operation: b.Operation, State: b.State, Total: b.Total, Done: b.Done, Refused: b.Refused,
		Failed: b.Failed, Retrying: b.Retrying, WalkedTo: b.WalkedTo, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}
}

func historyStepOf(h store.HistoryStep) wire.HistoryStep {
	return wire.HistoryStep{Version: h.Version, CommittedAt: h.CommittedAt, Cause: h.Cause, Detail: h.Detail, Owner: h.Owner,
		MessageID: h.MessageID, Bounces: h.Bounces, Passed: h.Passed, PassedCut: h.PassedCut}
}

func parkedMessageOf(p store.ParkedMessage) wire.ParkedMessage {
	return wire.ParkedMessage{ID: p.ID, InstanceID: p.InstanceID, ElementID: p.ElementID, Target: p.Target, Message: p.Message,
		CorrelationKey: p.CorrelationKey, Attempts: p.Attempts, CreatedAt: p.CreatedAt, ParkedAt: p.ParkedAt, Code: p.Code, Reason: p.Reason}
}
