// Transport benchmark, called by bench/run: the same calls to one skiffd
// through the unmodified iii-sdk (WebSocket engine protocol) and through
// HTTP/JSON (Node's fetch, keep-alive), interleaved call by call so both see
// the same machine load. Prints one JSON object with p50/p99 per transport.
//
// Usage: node bench/transport.mjs <port> <runs> <image>
// iii-sdk comes from tests/e2e/node (npm ci there; version pinned in its
// package-lock.json).
import { createRequire } from 'node:module'

const [port, runsArg, image] = process.argv.slice(2)
const runs = Number(runsArg)
const req = createRequire(new URL('../tests/e2e/node/package.json', import.meta.url))
const sdk = await import(req.resolve('iii-sdk'))
const registerWorker = sdk.registerWorker ?? sdk.default.registerWorker

const iii = registerWorker(`ws://127.0.0.1:${port}`, {
  workerName: 'skiff-bench', enableMetricsReporting: false, invocationTimeoutMs: 300000
})
const viaWs = (function_id, payload) => iii.trigger({ function_id, payload, timeoutMs: 300000 })
async function viaHttp (function_id, payload) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/functions/${function_id}`, {
    method: 'POST', body: JSON.stringify(payload), headers: { 'content-type': 'application/json' }
  })
  const body = await r.json()
  if (r.status !== 200) throw new Error(`${function_id}: HTTP ${r.status} ${JSON.stringify(body)}`)
  return body
}

const cases = {
  'sandbox::run': { payload: { image, lang: 'sh', code: 'echo hi', isolation: 'jail' },
                    check: r => r.stdout === 'hi\n' && r.exit_code === 0 },
  'sandbox::list': { payload: {}, check: r => Array.isArray(r.sandboxes) }
}

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]
}
async function timed (f, fid, c) {
  const t0 = process.hrtime.bigint()
  const r = await f(fid, c.payload)
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  if (!c.check(r)) throw new Error(`${fid}: unexpected result ${JSON.stringify(r)}`)
  return ms
}

const out = { runs }
for (const [fid, c] of Object.entries(cases)) {
  const n = fid === 'sandbox::list' ? runs * 10 : runs
  for (let i = 0; i < 3; ++i) { await timed(viaWs, fid, c); await timed(viaHttp, fid, c) }  // warm-up
  const ws = []; const http = []
  for (let i = 0; i < n; ++i) {
    // Alternate which transport goes first.
    if (i % 2) {
      ws.push(await timed(viaWs, fid, c))
      http.push(await timed(viaHttp, fid, c))
    } else {
      http.push(await timed(viaHttp, fid, c))
      ws.push(await timed(viaWs, fid, c))
    }
  }
  out[fid] = {
    n,
    ws: { p50_ms: pct(ws, 0.5), p99_ms: pct(ws, 0.99) },
    http: { p50_ms: pct(http, 0.5), p99_ms: pct(http, 0.99) }
  }
}
await iii.shutdown()
console.log(JSON.stringify(out))
