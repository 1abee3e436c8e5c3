// The unmodified iii-sdk (pinned in package-lock.json) against a real skiffd,
// using only the SDK's public API. SKIFF_URL is set by run.sh.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { createChannel } from 'iii-sdk/helpers'
import { ChannelReader } from 'iii-sdk/channel'
import { connectCaller, sError } from './iii_caller.mjs'

const URL = process.env.SKIFF_URL
const IMAGE = process.env.SKIFF_TEST_IMAGE ?? 'host'
const { iii, call } = connectCaller(URL, 'skiff-e2e')
after(async () => { await iii.shutdown() })

test('sandbox::run returns stdout and exit code', async () => {
  const r = await call('sandbox::run', { image: IMAGE, lang: 'python', code: 'print(6*7)' })
  assert.equal(r.stdout, '42\n')
  assert.equal(r.exit_code, 0)
  assert.equal(r.success, true)
  assert.equal(r.sandbox_id, undefined)
})

test('create → fs::write → exec → fs::read → stop', async () => {
  const { sandbox_id, isolation } = await call('sandbox::create', { image: IMAGE })
  assert.match(sandbox_id, /^[0-9a-f-]{36}$/)
  assert.ok(['jail', 'microvm'].includes(isolation))
  const w = await call('sandbox::fs::write', { sandbox_id, path: '/work/a.txt', content: 'hello', parents: true })
  assert.deepEqual(w, { bytes_written: 5, path: '/work/a.txt' })
  const x = await call('sandbox::exec', { sandbox_id, cmd: 'sh -c "tr a-z A-Z < /work/a.txt > /work/b.txt"' })
  assert.equal(x.exit_code, 0, x.stderr)
  const r = await call('sandbox::fs::read', { sandbox_id, path: '/work/b.txt' })
  assert.equal(r.body, 'HELLO')
  assert.equal(r.size, 5)
  assert.equal(r.mode, '0644')
  const bytes = await new ChannelReader(URL, r.content).readAll()
  assert.equal(bytes.toString(), 'HELLO')
  const list = await call('sandbox::list', {})
  assert.ok(list.sandboxes.some(s => s.sandbox_id === sandbox_id))
  assert.deepEqual(await call('sandbox::stop', { sandbox_id, wait: true }), { sandbox_id, stopped: true })
  const gone = await sError(call('sandbox::exec', { sandbox_id, cmd: 'true' }))
  assert.equal(gone.code, 'S002')
})

test('every fs operation', async () => {
  const { sandbox_id } = await call('sandbox::create', { image: IMAGE })
  try {
    assert.deepEqual(await call('sandbox::fs::mkdir', { sandbox_id, path: '/p/q', parents: true }), { created: true })
    await call('sandbox::fs::write', { sandbox_id, path: '/p/q/m.py', content: 'x = 1\n# TODO: y\n' })
    const ls = await call('sandbox::fs::ls', { sandbox_id, path: '/p/q' })
    assert.deepEqual(ls.entries.map(e => e.name), ['m.py'])
    const st = await call('sandbox::fs::stat', { sandbox_id, path: '/p/q' })
    assert.equal(st.is_dir, true)
    const g = await call('sandbox::fs::grep', { sandbox_id, path: '/p', pattern: 'TODO' })
    assert.deepEqual(g.matches.map(m => [m.path, m.line]), [['/p/q/m.py', 2]])
    const s = await call('sandbox::fs::sed', { sandbox_id, files: ['/p/q/m.py'], pattern: 'x = (\\d)', replacement: 'x = $1$1' })
    assert.equal(s.total_replacements, 1)
    assert.deepEqual(await call('sandbox::fs::chmod', { sandbox_id, path: '/p/q/m.py', mode: '0600' }), { updated: 1 })
    assert.deepEqual(await call('sandbox::fs::mv', { sandbox_id, src: '/p/q/m.py', dst: '/p/n.py' }), { moved: true })
    const r = await call('sandbox::fs::read', { sandbox_id, path: '/p/n.py' })
    assert.equal(r.body, 'x = 11\n# TODO: y\n')
    assert.equal(r.mode, '0600')
    assert.deepEqual(await call('sandbox::fs::rm', { sandbox_id, path: '/p', recursive: true }), { removed: true })
    const e = await sError(call('sandbox::fs::stat', { sandbox_id, path: '/p' }))
    assert.equal(e.code, 'S211')
  } finally {
    await call('sandbox::stop', { sandbox_id, wait: true })
  }
})

test('S-code errors decode, and a fix merged and resubmitted succeeds', async () => {
  const { sandbox_id } = await call('sandbox::create', { image: IMAGE })
  try {
    const req = { sandbox_id, path: '/deep/er/f.txt', content: 'x' }
    const e = await sError(call('sandbox::fs::write', req))
    assert.equal(e.code, 'S211')
    assert.deepEqual(e.fix, { parents: true })
    assert.equal(e.type, 'filesystem')
    assert.equal(e.docs_url, 'docs/errors.md#S211')
    const ok = await call('sandbox::fs::write', { ...req, ...e.fix })
    assert.equal(ok.bytes_written, 1)
    const bad = await sError(call('sandbox::exec', { sandbox_id, cmd: "echo 'x" }))
    assert.equal(bad.code, 'S001')
  } finally {
    await call('sandbox::stop', { sandbox_id, wait: true })
  }
  assert.equal((await sError(call('sandbox::create', { image: 'no-such-image' }))).code, 'S100')
  assert.equal((await sError(call('sandbox::exec', { sandbox_id: 'nope', cmd: 'true' }))).code, 'S001')
})

test('channel write and read of a 64 MiB file', async () => {
  const { sandbox_id } = await call('sandbox::create', { image: IMAGE })
  try {
    const data = randomBytes(64 << 20)
    const ch = await createChannel(iii)
    const pending = call('sandbox::fs::write', { sandbox_id, path: '/tmp/big.bin', content: ch.readerRef })
    for (let off = 0; off < data.length; off += 65536) {
      if (!ch.writer.stream.write(data.subarray(off, off + 65536))) {
        await new Promise(resolve => ch.writer.stream.once('drain', resolve))
      }
    }
    ch.writer.stream.end()
    const w = await pending
    assert.equal(w.bytes_written, data.length)
    const r = await call('sandbox::fs::read', { sandbox_id, path: '/tmp/big.bin' })
    assert.equal(r.size, data.length)
    assert.equal(r.body, undefined)
    const back = await new ChannelReader(URL, r.content).readAll()
    assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(data).digest('hex'))
  } finally {
    await call('sandbox::stop', { sandbox_id, wait: true })
  }
})

test('engine::functions::info describes every sandbox function', async () => {
  const list = await call('engine::functions::list', {})
  const ids = list.functions.map(f => f.function_id)
  assert.equal(ids.filter(id => id.startsWith('sandbox::')).length, 31)
  for (const id of ids) {
    const info = await call('engine::functions::info', { function_id: id })
    assert.equal(info.function_id, id)
    assert.equal(info.worker_name, 'iii-sandbox')
    assert.equal(info.request_schema.$schema, 'http://json-schema.org/draft-07/schema#')
    assert.equal(info.request_schema.type, 'object')
    assert.ok(info.response_schema)
  }
})

// Live processes through iii: output followed through a data channel as it
// is written, stdin through a data channel, typed errors.
test('sandbox::process::* streams output and takes stdin through channels', async () => {
  const { sandbox_id } = await call('sandbox::create', { image: IMAGE })
  try {
    const { pid } = await call('sandbox::process::start', { sandbox_id, argv: ['sh', '-c', 'echo first; sleep 2; echo second'] })
    assert.ok(pid > 0)
    const r = await call('sandbox::process::output', { sandbox_id, pid, follow: true })
    const reader = new ChannelReader(URL, r.stream)
    reader.ensureConnected()
    let text = ''
    const lines = []
    for await (const chunk of reader.stream) {
      text += chunk.toString()
      let nl
      while ((nl = text.indexOf('\n')) >= 0) {
        lines.push({ at: Date.now(), line: JSON.parse(text.slice(0, nl)) })
        text = text.slice(nl + 1)
      }
    }
    const data = lines.filter(l => l.line.type === 'data')
    assert.equal(data.map(l => Buffer.from(l.line.data, 'base64').toString()).join(''), 'first\nsecond\n')
    const end = lines[lines.length - 1]
    assert.equal(end.line.type, 'end')
    assert.equal(end.line.process.exit_code, 0)
    assert.ok(end.at - data[0].at > 1500, 'the first line arrived only when the process ended')

    const cat = await call('sandbox::process::start', { sandbox_id, argv: ['cat'], stdin: true })
    const ch = await createChannel(iii)
    const pending = call('sandbox::process::input', { sandbox_id, pid: cat.pid, content: ch.readerRef, close: true })
    ch.writer.stream.write(Buffer.from('hello '))
    ch.writer.stream.end(Buffer.from('world'))
    assert.equal((await pending).bytes_written, 11)
    const done = await call('sandbox::process::wait', { sandbox_id, pid: cat.pid, timeout_ms: 30000 })
    assert.equal(done.state, 'exited')
    const out = await call('sandbox::process::output', { sandbox_id, pid: cat.pid })
    assert.equal(Buffer.from(out.stdout.data, 'base64').toString(), 'hello world')

    assert.equal((await sError(call('sandbox::process::signal', { sandbox_id, pid, signal: 'SEGV' }))).code, 'S001')
    assert.equal((await sError(call('sandbox::process::wait', { sandbox_id, pid: 999999 }))).code, 'S220')
    assert.equal((await sError(call('sandbox::process::input', { sandbox_id, pid: cat.pid, data: 'x' }))).code, 'S221')
  } finally {
    await call('sandbox::stop', { sandbox_id, wait: true })
  }
})
