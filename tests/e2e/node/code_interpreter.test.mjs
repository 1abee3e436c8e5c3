// The unmodified @e2b/code-interpreter SDK (pinned in package-lock.json)
// against a real skiffd: Sandbox.create() makes a `code-interpreter-v1`
// sandbox, whose server the daemon starts (docs/images.md#services), and
// runCode reaches it through the daemon's forwarding of E2b-Sandbox-Port
// 49999. Started by e2b_run.sh <skiff> <backend> code_interpreter.test.mjs.
// docs/e2b.md#code-interpreter says what is supported.
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'
import { NotFoundError } from 'e2b'

let sbx
// runCode with the SDK's usual 60 s handshake bound. The sandbox's own
// bound is the create's, which must be long; the SDK leaves a failed
// call's timer running, which would keep the suite alive that long.
const run = (code, opts = {}) => sbx.runCode(code, { requestTimeoutMs: 60000, ...opts })
before(async () => {
  // The create waits for the server and its first kernel: seconds on KVM,
  // minutes under TCG on a busy host.
  sbx = await Sandbox.create({ timeoutMs: 600000, requestTimeoutMs: 600000 })
})
after(async () => {
  if (sbx) await sbx.kill().catch(() => {})
})

test('runCode: variables survive between calls, the last expression is the main result', async () => {
  const first = await run('x = 41')
  assert.equal(first.error, undefined)
  const second = await run('x + 1')
  assert.equal(second.text, '42')
  assert.equal(second.results.filter(r => r.isMainResult).length, 1)
  assert.ok(second.executionCount > first.executionCount)
})

test('runCode: stdout and stderr stream to the callbacks and the logs', async () => {
  const out = []
  const err = []
  const exec = await run("import sys\nprint('hi')\nprint('oops', file=sys.stderr)", {
    onStdout: m => out.push(m.line),
    onStderr: m => err.push(m.line)
  })
  assert.deepEqual(out, ['hi\n'])
  assert.deepEqual(err, ['oops\n'])
  assert.deepEqual(exec.logs.stdout, ['hi\n'])
  assert.deepEqual(exec.logs.stderr, ['oops\n'])
})

test('runCode: an exception is the execution error, with its traceback', async () => {
  const seen = []
  const exec = await run('1/0', { onError: e => seen.push(e.name) })
  assert.equal(exec.error.name, 'ZeroDivisionError')
  assert.equal(exec.error.value, 'division by zero')
  assert.match(exec.error.traceback, /ZeroDivisionError/)
  assert.deepEqual(seen, ['ZeroDivisionError'])
})

test('runCode: a matplotlib figure comes back as a PNG result', async () => {
  // matplotlib's first import builds its font cache: slow under TCG.
  const exec = await run('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()', {
    timeoutMs: 300000
  })
  assert.equal(exec.error, undefined)
  const png = exec.results.find(r => r.png)
  assert.ok(png, JSON.stringify(exec.results.map(r => r.formats())))
  const bytes = Buffer.from(png.png, 'base64')
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
})

test('runCode: envs apply to one execution only', async () => {
  const withEnv = await run("import os\nos.environ.get('SKIFF_T', 'unset')", { envs: { SKIFF_T: 'set' } })
  assert.equal(withEnv.text, "'set'")
  const without = await run("os.environ.get('SKIFF_T', 'unset')")
  assert.equal(without.text, "'unset'")
})

test('contexts: create, run in, list, restart, remove; an unknown one is NotFoundError', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.equal(ctx.language, 'python')
  assert.equal(ctx.cwd, '/tmp')
  const cwd = await run('import os\nos.getcwd()', { context: ctx })
  assert.equal(cwd.text, "'/tmp'")
  const isolated = await run("'x' in dir()", { context: ctx })
  assert.equal(isolated.text, 'False')
  assert.ok((await sbx.listCodeContexts()).some(c => c.id === ctx.id))
  await run('y = 1', { context: ctx })
  await sbx.restartCodeContext(ctx)
  assert.equal((await run('y', { context: ctx })).error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some(c => c.id === ctx.id))
  await assert.rejects(run('1', { context: ctx }), NotFoundError)
})
