// Camunda 8's Node.js SDK, unchanged, works three jobs of a Sutra worker
// through its Zeebe gateway (gRPC): it completes one, throws a BPMN error
// from one and fails one with no retries left. The gateway address and the
// credentials come from the environment the SDK reads (ZEEBE_GRPC_ADDRESS,
// CAMUNDA_AUTH_STRATEGY, CAMUNDA_OAUTH_TOKEN, ...), set by
// api/zeebe/camunda8_node_test.go. Each handled job prints a JSON line; an
// error prints {"error": ...}.
import { Camunda8 } from '@camunda8/sdk'

const zeebe = new Camunda8().getZeebeGrpcApiClient()
const say = (o) => console.log(JSON.stringify(o))
const handlers = {
  'node-complete': (job) => job.complete({ doneBy: 'node', seen: job.variables.orderId }),
  'node-error': (job) => job.error({ errorCode: 'REJECTED', errorMessage: 'rejected by node', variables: { why: 'node' } }),
  'node-fail': (job) => job.fail({ errorMessage: 'failed by node', retries: 0 }),
}
let left = Object.keys(handlers).length
const workers = []
const done = new Promise((resolve) => {
  for (const [taskType, handle] of Object.entries(handlers)) {
    workers.push(zeebe.createWorker({
      taskType,
      timeout: 60000,
      pollInterval: 100,
      taskHandler: async (job) => {
        const ack = await handle(job)
        say({ type: taskType, key: job.key, headers: job.customHeaders, retries: job.retries })
        if (--left === 0) resolve()
        return ack
      },
      onConnectionError: () => say({ error: `connection error of worker ${taskType}` }),
    }))
  }
})
const timeout = setTimeout(() => { say({ error: 'timed out waiting for the jobs' }); process.exit(1) }, 60000)
await done
clearTimeout(timeout)
await Promise.all(workers.map((w) => w.close()))
await zeebe.close()
process.exit(0)
