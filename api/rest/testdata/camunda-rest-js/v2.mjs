// Camunda 8.8's REST clients, unchanged, against a Sutra worker's /v2:
// api/rest/camunda_rest_node_test.go runs it with the worker's address and
// credentials in the environment the clients read. SUTRA_CLIENT picks the
// client: "orchestration" is @camunda8/orchestration-cluster-api with
// CAMUNDA_SDK_VALIDATION=strict (every answer checked against Camunda's
// schemas), "sdk" is @camunda8/sdk's REST client. Each step prints a JSON
// line; a failure prints {"error": ...} and exits 1.
import { createCamundaClient } from '@camunda8/orchestration-cluster-api'
import { Camunda8 } from '@camunda8/sdk'

const say = (o) => console.log(JSON.stringify(o))
const fail = (e) => {
  say({ error: String(e && (e.message || e)), fields: e && typeof e === 'object' ? { ...e } : undefined })
  process.exit(1)
}
process.on('unhandledRejection', fail)
setTimeout(() => fail('timed out'), 90000).unref()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// until polls get until ok holds of its answer: what a relay's consumer
// applies after a call answered.
async function until(what, get, ok) {
  for (let i = 0; i < 300; i++) {
    const v = await get()
    if (ok(v)) return v
    await sleep(50)
  }
  throw new Error(`${what}: not within 15s`)
}

async function orchestration() {
  const c = createCamundaClient()
  const noWait = { waitUpToMs: 0 }
  const topology = await c.getTopology()
  say({ step: 'topology', brokers: topology.brokers.length, gatewayVersion: topology.gatewayVersion })
  const deployed = await c.deployResourcesFromFiles(['../orders.bpmn'])
  say({ step: 'deploy', processes: deployed.deployments.map((d) => d.processDefinition?.processDefinitionId).filter(Boolean) })

  const start = (id, variables) => c.createProcessInstance({ processDefinitionId: id, variables })
  const state = (key) => c.getProcessInstance({ processInstanceKey: key }, noWait)
  const ended = (key, want) => until(`instance ${key} ${want}`, () => state(key), (p) => p.state === want)

  const keys = {}
  for (const mode of ['complete', 'error', 'fail']) {
    keys[mode] = (await start('rest_charge', { mode, orderId: `o-${mode}` })).processInstanceKey
  }
  const failed = new Set()
  const worker = c.createJobWorker({
    jobType: 'rest-charge', jobTimeoutMs: 60000, maxParallelJobs: 5, pollTimeoutMs: 5000, workerName: 'node-rest',
    jobHandler: async (job) => {
      say({ step: 'job', mode: job.variables.mode, key: job.jobKey, headers: job.customHeaders, retries: job.retries })
      switch (job.variables.mode) {
        case 'complete': return job.complete({ doneBy: 'rest' })
        case 'error': return job.error({ errorCode: 'REJECTED', errorMessage: 'rejected by rest', variables: { why: 'rest' } })
        default:
          if (!failed.has(job.processInstanceKey)) {
            failed.add(job.processInstanceKey)
            return job.fail({ errorMessage: 'failed by rest', retries: 0 })
          }
          return job.complete({ retried: true })
      }
    },
  })
  await ended(keys.complete, 'COMPLETED')
  await ended(keys.error, 'COMPLETED')
  say({ step: 'jobs', completed: keys.complete, caught: keys.error })

  const incidents = await until('the incident', () => c.searchIncidents({ filter: { processInstanceKey: keys.fail } }, noWait),
    (r) => r.items.length === 1)
  const incident = incidents.items[0]
  say({ step: 'incident', errorType: incident.errorType, errorMessage: incident.errorMessage, state: incident.state })
  if (incident.errorType !== 'JOB_NO_RETRIES') throw new Error(`incident ${JSON.stringify(incident)}`)
  await c.resolveIncident({ incidentKey: incident.incidentKey })
  await ended(keys.fail, 'COMPLETED')
  say({ step: 'resolved', key: keys.fail })
  worker.stop()

  const review = (await start('rest_review', { orderId: 'o-review' })).processInstanceKey
  const tasks = await until('the user task', () => c.searchUserTasks({ filter: { processInstanceKey: review } }, noWait),
    (r) => r.items.length === 1)
  const task = tasks.items[0]
  await c.assignUserTask({ userTaskKey: task.userTaskKey, assignee: 'ann' })
  const assigned = await c.getUserTask({ userTaskKey: task.userTaskKey }, noWait)
  if (assigned.assignee !== 'ann') throw new Error(`assigned ${JSON.stringify(assigned)}`)
  await c.completeUserTask({ userTaskKey: task.userTaskKey, variables: { approved: true } })
  say({ step: 'user task', name: task.name, assignee: assigned.assignee })
  const published = await c.publishMessage({ name: 'rest-paid', correlationKey: 'o-review', timeToLive: 60000, variables: { paid: true } })
  say({ step: 'message', key: published.messageKey })
  await ended(review, 'COMPLETED')

  const doomed = (await start('rest_review', { orderId: 'o-doomed' })).processInstanceKey
  await c.cancelProcessInstance({ processInstanceKey: doomed })
  const cancelled = await ended(doomed, 'TERMINATED')
  say({ step: 'cancel', state: cancelled.state })
  const found = await c.searchProcessInstances({ filter: { processInstanceKey: doomed } }, noWait)
  if (found.items.length !== 1 || found.items[0].state !== 'TERMINATED') throw new Error(`search ${JSON.stringify(found)}`)
}

async function sdk() {
  const c = new Camunda8().getCamundaRestClient()
  const topology = await c.getTopology()
  say({ step: 'topology', brokers: topology.brokers.length })
  await c.deployResourcesFromFiles(['../orders.bpmn'])
  const created = await c.createProcessInstance({ processDefinitionId: 'rest_charge', variables: { mode: 'complete' } })
  const key = created.processInstanceKey
  let done
  const handled = new Promise((r) => { done = r })
  const worker = c.createJobWorker({
    type: 'rest-charge', maxJobsToActivate: 5, timeout: 60000, worker: 'sdk-rest', pollIntervalMs: 100,
    jobHandler: async (job) => {
      const ack = await job.complete({ doneBy: 'sdk' })
      say({ step: 'job', key: job.jobKey, instance: job.processInstanceKey })
      done()
      return ack
    },
  })
  await handled
  worker.stop()
  const review = await c.createProcessInstance({ processDefinitionId: 'rest_review', variables: { orderId: 'o-sdk' } })
  const published = await c.publishMessage({ name: 'rest-paid', correlationKey: 'o-sdk', timeToLive: 60000 })
  say({ step: 'message', key: published.messageKey })
  await c.cancelProcessInstance({ processInstanceKey: review.processInstanceKey })
  say({ step: 'cancel', key: review.processInstanceKey, completed: key })
}

await (process.env.SUTRA_CLIENT === 'sdk' ? sdk() : orchestration()).catch(fail)
say({ ok: true })
process.exit(0)
