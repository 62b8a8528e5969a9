// The client side of Camunda's realistic load test (camunda/camunda
// load-tests, values-realistic-benchmark.yaml) on Camunda 8's Node.js SDK,
// unchanged, against a Sutra worker's Zeebe gateway (gRPC): tools/camundaload
// runs it. Its Starter deploys Camunda's files (the bank dispute process, the
// refunding process and the fraud-rating DMN, read from CAMUNDA_LOAD_FILES)
// and starts one root instance every 1/RATE s with the realistic payload and
// customerId set to a counter (the Starter's business key); its six workers
// are the benchmark's: each type's capacity (jobs activated at once), threads
// (handlers running at once, the rest waiting their turn as on the Java
// worker's thread pool) and completion delay, the two that publish a message
// keyed by the job's correlationKey before they complete (with the Java
// client's default time to live, one hour), and every completion carrying
// the empty payload. It stops starting after DURATION s and exits DRAIN s
// later (or at SIGTERM). Each second it prints one JSON line of its counters
// since the start; errors are counted, and the first of each kind printed.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Camunda8, Zeebe } from '@camunda8/sdk'

const env = (k, d) => process.env[k] ?? d
const files = env('CAMUNDA_LOAD_FILES')
const rate = Number(env('RATE', '1'))
const duration = Number(env('DURATION', '120'))
const drain = Number(env('DRAIN', '60'))
const processId = 'bankDisputeHandling'

// type, capacity, threads, completion delay (ms), message to publish.
const workers = [
  ['customer_notification', 30, 10, 300, 'dispute_process_receive_documents'],
  ['extract_data_from_document', 30, 10, 300, ''],
  ['dispute_process_request_proof_from_vendor', 60, 30, 300, 'dispute_process_refund_approved'],
  ['dispute_process_request_get_vendor_info', 30, 10, 10, ''],
  ['refunding', 30, 30, 300, ''],
  ['inform_about_successful_claim', 30, 10, 300, ''],
]

const counters = { started: 0, startErrors: 0, startMs: [], publishMs: [], completeMs: [], jobs: {}, published: 0, errors: 0 }
const firstErrors = new Set()
const say = (o) => console.log(JSON.stringify(o))
const fail = (kind, err) => {
  counters.errors++
  if (!firstErrors.has(kind)) {
    firstErrors.add(kind)
    say({ error: `${kind}: ${err?.message ?? err}` })
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// A semaphore: the worker's threads.
function pool(size) {
  let free = size
  const waiting = []
  return {
    async acquire() {
      if (free > 0) {
        free--
        return
      }
      await new Promise((resolve) => waiting.push(resolve))
    },
    release() {
      const next = waiting.shift()
      if (next) next()
      else free++
    },
  }
}

const zeebe = new Camunda8().getZeebeGrpcApiClient()
const payload = JSON.parse(readFileSync(join(files, 'realisticPayload.json'), 'utf8'))
await zeebe.deployResources([
  { name: 'bankCustomerComplaintDisputeHandling.bpmn', process: readFileSync(join(files, 'bankCustomerComplaintDisputeHandling.bpmn')) },
  { name: 'refundingProcess.bpmn', process: readFileSync(join(files, 'refundingProcess.bpmn')) },
  { name: 'determineFraudRatingConfidence.dmn', decision: readFileSync(join(files, 'determineFraudRatingConfidence.dmn')) },
])
say({ deployed: true })

const running = []
for (const [taskType, capacity, threads, delay, message] of workers) {
  counters.jobs[taskType] = 0
  const threadPool = pool(threads)
  running.push(zeebe.createWorker({
    taskType,
    maxJobsToActivate: capacity,
    timeout: 1800,
    pollInterval: 100,
    taskHandler: async (job) => {
      // A thread handles the job (publish, delay) and is free once its
      // completion is sent, as on the Java worker; the SDK counts the job
      // against the capacity until the completion is answered.
      await threadPool.acquire()
      const began = Date.now()
      let published = true
      try {
        if (message) {
          try {
            const sent = Date.now()
            await zeebe.publishMessage({ name: message, correlationKey: String(job.variables.correlationKey), timeToLive: 3600000 })
            counters.publishMs.push(Date.now() - sent)
            counters.published++
          } catch (err) {
            // As the Java worker: no completion; the job times out and is
            // activated again.
            fail(`publish ${message}`, err)
            published = false
          }
        }
        await sleep(Math.max(0, delay - (Date.now() - began)))
      } finally {
        threadPool.release()
      }
      if (!published) return job.forward()
      try {
        const sent = Date.now()
        const ack = await job.complete({})
        counters.completeMs.push(Date.now() - sent)
        counters.jobs[taskType]++
        return ack
      } catch (err) {
        // Refused (the job timed out and went to another handler, say):
        // counted; the job was acted on, so nothing more to answer.
        fail(`complete ${taskType}`, err)
        return Zeebe.Types.JOB_ACTION_ACKNOWLEDGEMENT
      }
    },
    onConnectionError: () => fail(`connection of worker ${taskType}`, 'lost'),
  }))
}

// The Starter: instance i at i/rate s, whatever the answers' latency.
const began = Date.now()
let next = 0
const starter = setInterval(() => {
  const due = Math.floor(((Date.now() - began) / 1000) * rate)
  for (; next < due && next < duration * rate; next++) {
    const sent = Date.now()
    zeebe.createProcessInstance({ bpmnProcessId: processId, variables: { ...payload, customerId: next + 1 } })
      .then(() => {
        counters.started++
        counters.startMs.push(Date.now() - sent)
      })
      .catch((err) => {
        counters.startErrors++
        fail('create instance', err)
      })
  }
}, 5)

// p99 of the latencies (ms) in ms, sorting them in place.
const p99 = (ms) => {
  ms.sort((a, b) => a - b)
  return ms.length ? ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))] : 0
}
const report = setInterval(() => {
  say({
    t: (Date.now() - began) / 1000, started: counters.started, startErrors: counters.startErrors,
    startP99ms: p99(counters.startMs), publishP99ms: p99(counters.publishMs), completeP99ms: p99(counters.completeMs),
    jobs: counters.jobs, published: counters.published, errors: counters.errors,
  })
}, 1000)

let stopping = false
async function stop(code) {
  if (stopping) return
  stopping = true
  clearInterval(starter)
  clearInterval(report)
  await Promise.all(running.map((w) => w.close()))
  await zeebe.close()
  process.exit(code)
}
process.on('SIGTERM', () => stop(0))
process.on('SIGINT', () => stop(0))
await sleep((duration + drain) * 1000)
await stop(0)
