// What the iii-sdk suites share: a caller (the unmodified SDK's public API)
// and the S-code error it carries.
import assert from 'node:assert/strict'
import { registerWorker } from 'iii-sdk'

// A worker that only calls; `call(function_id, payload)` triggers a function
// and resolves with its result. `options` go to registerWorker (headers…).
export function connectCaller (url, workerName, options = {}) {
  const iii = registerWorker(url, { workerName, enableMetricsReporting: false, invocationTimeoutMs: 120000, ...options })
  const call = (function_id, payload, timeoutMs = 120000) => iii.trigger({ function_id, payload, timeoutMs })
  return { iii, call }
}

// The S-code object of a failed call: it travels inside the SDK's error
// message (docs/architecture.md#transports-and-their-limits). Fails the test
// when the call succeeds or carries no S-code object.
export async function sError (p) {
  try {
    await p
  } catch (e) {
    const text = String(e?.message ?? e)
    const at = text.indexOf('{', text.indexOf('handler error: '))
    assert.ok(at >= 0, `no S-code object in: ${text}`)
    return JSON.parse(text.slice(at))
  }
  assert.fail('expected an error')
}
