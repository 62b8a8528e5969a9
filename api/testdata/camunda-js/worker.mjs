// Camunda's official Node.js external-task client, used exactly as a Camunda
// user would, against a Sutra worker. api/camunda_js_test.go runs it with
// SUTRA_BASE_URL and SUTRA_TOKEN and checks what became of each instance.
// One line of JSON per action on stdout; exit 0 once every topic's work is
// done, 1 after a minute.
import { Client, BasicAuthInterceptor, Variables } from "camunda-external-task-client-js";

const client = new Client({
  baseUrl: process.env.SUTRA_BASE_URL,
  workerId: "node-worker",
  asyncResponseTimeout: 10000,
  lockDuration: 20000,
  autoPoll: false,
  interceptors: new BasicAuthInterceptor({ username: "node", password: process.env.SUTRA_TOKEN }),
});

const done = new Set();
const want = ["complete", "retry-then-complete", "fail-to-zero", "bpmn-error", "extend-lock"];
const say = (o) => console.log(JSON.stringify(o));
const finish = (topic) => {
  done.add(topic);
  if (want.every((t) => done.has(t))) {
    client.stop();
    say({ all: "done" });
    setTimeout(() => process.exit(0), 100);
  }
};

client.subscribe("complete", async ({ task, taskService }) => {
  const vars = new Variables();
  vars.set("doneBy", "node");
  vars.set("receipt", { id: task.variables.get("orderId"), lines: [1, 2] });
  await taskService.complete(task, vars);
  say({ topic: "complete", task: task.id, order: task.variables.get("orderId") });
  finish("complete");
});

let attempts = 0;
client.subscribe("retry-then-complete", async ({ task, taskService }) => {
  attempts++;
  if (attempts === 1) {
    await taskService.handleFailure(task, { errorMessage: "flaky", errorDetails: "first try", retries: 1, retryTimeout: 200 });
    say({ topic: "retry-then-complete", task: task.id, failed: true, retries: task.retries });
    return;
  }
  await taskService.complete(task);
  say({ topic: "retry-then-complete", task: task.id, attempts, errorMessage: task.errorMessage });
  finish("retry-then-complete");
});

client.subscribe("fail-to-zero", async ({ task, taskService }) => {
  await taskService.handleFailure(task, { errorMessage: "card service down", retries: 0, retryTimeout: 0 });
  say({ topic: "fail-to-zero", task: task.id });
  finish("fail-to-zero");
});

client.subscribe("bpmn-error", async ({ task, taskService }) => {
  const vars = new Variables();
  vars.set("why", "limit exceeded");
  await taskService.handleBpmnError(task, "REJECTED", "rejected by the worker", vars);
  say({ topic: "bpmn-error", task: task.id });
  finish("bpmn-error");
});

client.subscribe("extend-lock", async ({ task, taskService }) => {
  await taskService.extendLock(task, 60000);
  await taskService.complete(task);
  say({ topic: "extend-lock", task: task.id });
  finish("extend-lock");
});

client.on("complete:error", ({ id }, e) => say({ error: "complete", task: id, message: String(e) }));
client.on("handleFailure:error", ({ id }, e) => say({ error: "handleFailure", task: id, message: String(e) }));
client.on("handleBpmnError:error", ({ id }, e) => say({ error: "handleBpmnError", task: id, message: String(e) }));
client.on("extendLock:error", ({ id }, e) => say({ error: "extendLock", task: id, message: String(e) }));
client.on("poll:error", (e) => say({ error: "poll", message: String(e) }));

client.start();
setTimeout(() => {
  say({ timeout: true, done: [...done] });
  process.exit(1);
}, 60000);
