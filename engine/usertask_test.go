package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sutra-run/worker/bpmn"
	"github.com/sutra-run/worker/fault"
)

// userTaskProcess is start → user task "Review" → end, with a native user
// task's assignment, schedule, priority and form.
func userTaskProcess(ext string) string {
	return `<bpmn:startEvent id="S" /><bpmn:userTask id="Review"><bpmn:extensionElements>` + ext +
		`</bpmn:extensionElements></bpmn:userTask><bpmn:endEvent id="E" />` + flow("F1", "S", "Review") + flow("F2", "Review", "E")
}

const nativeUserTask = `<zeebe:userTask /><zeebe:formDefinition formId="review-form" />
	<zeebe:assignmentDefinition assignee="=owner" candidateGroups="sales, managers" candidateUsers="=reviewers" />
	<zeebe:taskSchedule dueDate="=due" followUpDate="2025-03-02T09:00:00Z" />
	<zeebe:priorityDefinition priority="=urgency * 10" />
	<zeebe:ioMapping><zeebe:output source="=approved" target="review.approved" /></zeebe:ioMapping>`

func TestUserTaskCarriesItsEvaluatedAssignmentScheduleAndForm(t *testing.T) {
	x := newInstance(t, parse(t, userTaskProcess(nativeUserTask), ""))
	eff := x.step(Trigger{Kind: TriggerStart, Variables: map[string]any{
		"owner": "ada", "reviewers": []any{"bob", "cy"}, "due": "2025-03-05T17:00:00+01:00", "urgency": 8.0,
	}})
	if len(eff.Tasks) != 1 {
		t.Fatalf("tasks = %+v", eff.Tasks)
	}
	task := eff.Tasks[0]
	want := &UserTask{Assignee: "ada", CandidateGroups: []string{"sales", "managers"}, CandidateUsers: []string{"bob", "cy"},
		FormID: "review-form", DueDate: "2025-03-05T17:00:00+01:00", FollowUpDate: "2025-03-02T09:00:00Z", Priority: 80}
	if task.Type != "" || !reflect.DeepEqual(task.User, want) || task.Retries != 3 {
		t.Errorf("task = %+v\nuser %+v\nwant %+v", task, task.User, want)
	}
	if tok := x.token("Review"); tok.Wait != WaitTask {
		t.Errorf("token = %+v", tok)
	}
	eff = x.step(Trigger{Kind: TriggerTaskCompleted, TokenID: task.TokenID, Variables: map[string]any{"approved": true}})
	if !eff.Completed || !reflect.DeepEqual(x.in.State.Variables["review"], map[string]any{"approved": true}) {
		t.Errorf("completion: %+v, variables %v", eff, x.in.State.Variables)
	}
}

func TestJobWorkerUserTaskHasTheZeebeUserTaskType(t *testing.T) {
	x := newInstance(t, parse(t, userTaskProcess(`<zeebe:formDefinition formKey="camunda-forms:bpmn:userTaskForm_1" />`), ""))
	eff := x.step(Trigger{Kind: TriggerStart})
	want := &UserTask{FormKey: "camunda-forms:bpmn:userTaskForm_1", Priority: 50}
	if len(eff.Tasks) != 1 || eff.Tasks[0].Type != bpmn.UserTaskType || !reflect.DeepEqual(eff.Tasks[0].User, want) {
		t.Fatalf("tasks = %+v", eff.Tasks)
	}
}

func TestUserTaskExpressionsThatFailRaiseIncidents(t *testing.T) {
	tests := []struct {
		name, ext string
		vars      map[string]any
		want      string
	}{
		{"assignee null", `<zeebe:userTask /><zeebe:assignmentDefinition assignee="=owner" />`, nil, "assignee of Review"},
		{"candidates not strings", `<zeebe:userTask /><zeebe:assignmentDefinition candidateGroups="=groups" />`, map[string]any{"groups": []any{1.0}}, "candidate groups of Review"},
		{"due date not a date-time", `<zeebe:userTask /><zeebe:taskSchedule dueDate="=due" />`, map[string]any{"due": "tomorrow"}, "due date of Review"},
		{"priority out of range", `<zeebe:userTask /><zeebe:priorityDefinition priority="=p" />`, map[string]any{"p": 101.0}, "priority of Review"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newInstance(t, parse(t, userTaskProcess(tt.ext), ""))
			eff := x.step(Trigger{Kind: TriggerStart, Variables: tt.vars})
			if len(eff.Tasks) != 0 || len(eff.Incidents) != 1 || eff.Incidents[0].Code != fault.IncidentExpression ||
				!strings.Contains(eff.Incidents[0].Message, tt.want) {
				t.Errorf("effects = %+v", eff)
			}
		})
	}
}
