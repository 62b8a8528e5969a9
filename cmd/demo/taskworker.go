package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

// taskWorker is a small external-task worker speaking the Camunda REST
// protocol the worker serves under /engine-rest, as a user's service would:
// fetchAndLock with a long poll, then complete or bpmnError.
type taskWorker struct {
	base, token, id string
	handlers        map[string]taskHandler // by topic
	done            atomic.Int64           // outcomes answered 204
}

// task is the part of a locked task the handlers read.
type task struct {
	ID        string                     `json:"id"`
	Topic     string                     `json:"topicName"`
	Instance  string                     `json:"processInstanceId"`
	Variables map[string]json.RawMessage `json:"variables"`
}

// variable decodes the typed variable name's value into v.
func (t task) variable(name string, v any) error {
	var typed struct {
		Value json.RawMessage `json:"value"`
	}
	raw, ok := t.Variables[name]
	if !ok {
		return fmt.Errorf("task %s (%s) has no variable %q", t.ID, t.Topic, name)
	}
	if err := json.Unmarshal(raw, &typed); err != nil {
		return err
	}
	return json.Unmarshal(typed.Value, v)
}

// outcome is what a handler decided: complete with variables, or a BPMN error.
type outcome struct {
	variables map[string]any
	bpmnError string
}

type taskHandler func(ctx context.Context, t task) (outcome, error)

// run fetches and handles tasks until ctx ends.
func (w *taskWorker) run(ctx context.Context) error {
	var topics []map[string]any
	for topic := range w.handlers {
		topics = append(topics, map[string]any{"topicName": topic, "lockDuration": 60_000})
	}
	for ctx.Err() == nil {
		var tasks []task
		err := w.call(ctx, "/fetchAndLock", map[string]any{
			"workerId": w.id, "maxTasks": 32, "asyncResponseTimeout": 5_000, "topics": topics}, &tasks)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, t := range tasks {
			o, err := w.handlers[t.Topic](ctx, t)
			if err != nil {
				return err
			}
			if err := w.answer(ctx, t, o); err != nil {
				return err
			}
			w.done.Add(1)
		}
	}
	return nil
}

func (w *taskWorker) answer(ctx context.Context, t task, o outcome) error {
	if o.bpmnError != "" {
		return w.call(ctx, "/"+t.ID+"/bpmnError", map[string]any{"workerId": w.id, "errorCode": o.bpmnError}, nil)
	}
	typed := map[string]any{}
	for name, v := range o.variables {
		typed[name] = map[string]any{"value": v, "type": camundaType(v)}
	}
	return w.call(ctx, "/"+t.ID+"/complete", map[string]any{"workerId": w.id, "variables": typed}, nil)
}

func camundaType(v any) string {
	switch v.(type) {
	case bool:
		return "Boolean"
	case int, int64:
		return "Long"
	case float64:
		return "Double"
	case string:
		return "String"
	default:
		return "Json"
	}
}

// call posts body to the external-task route and decodes the answer into out.
func (w *taskWorker) call(ctx context.Context, route string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+"/engine-rest/external-task"+route, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var problem struct {
			Type, Message, Code string
		}
		_ = json.NewDecoder(resp.Body).Decode(&problem)
		return fmt.Errorf("POST %s: %s: %s %s", route, resp.Status, problem.Code, problem.Message)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
