// docs/openapi.json, and the document a running skiffd serves at
// /openapi.json, checked by a real OpenAPI 3.1 validator from npm (pinned in
// package-lock.json). SKIFF_HTTP is set by run.sh.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { Validator } from '@seriousme/openapi-schema-validator'

const HTTP = process.env.SKIFF_HTTP
const file = new URL('../../../docs/openapi.json', import.meta.url)

test('docs/openapi.json is a valid OpenAPI 3.1 document', async () => {
  const doc = JSON.parse(readFileSync(file, 'utf8'))
  const v = new Validator()
  const r = await v.validate(doc)
  assert.equal(r.valid, true, JSON.stringify(r.errors, null, 1))
  assert.equal(v.version, '3.1')
})

test('the served /openapi.json is the same document, without a key', async () => {
  const res = await fetch(`${HTTP}/openapi.json`)
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type'), /application\/json/)
  assert.deepEqual(await res.json(), JSON.parse(readFileSync(file, 'utf8')))
})

test('every documented function answers, and its errors are S-code objects', async () => {
  const doc = JSON.parse(readFileSync(file, 'utf8'))
  const fns = Object.keys(doc.paths).filter(p => p.startsWith('/v1/functions/'))
  assert.ok(fns.length >= 27)
  for (const p of fns) {
    // A request with a wrong type for sandbox_id: every function answers a
    // documented status (200 for the few without sandbox_id).
    const res = await fetch(`${HTTP}${p}`, { method: 'POST', body: '{"sandbox_id": 5}', headers: { 'content-type': 'application/json' } })
    const documented = Object.keys(doc.paths[p].post.responses)
    assert.ok(documented.includes(String(res.status)), `${p}: ${res.status} not among ${documented}`)
  }
})
