// The unmodified e2b SDK (pinned in package-lock.json) against a real
// skiffd's E2B-compatible API, using only the SDK's public API, on the
// backend e2b_run.sh names. docs/e2b.md says what is supported.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import {
  Sandbox, CommandExitError, FileNotFoundError, NotFoundError, AuthenticationError, SandboxError,
  SandboxNotFoundError, InvalidArgumentError, FilesystemEventType
} from 'e2b'

const TEMPLATE = process.env.SKIFF_E2B_TEMPLATE ?? 'base'
const ISOLATION = process.env.SKIFF_E2B_ISOLATION ?? 'jail'
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'
const opened = []
const snapshots = []
async function create (opts = {}, template = TEMPLATE) {
  const sbx = await Sandbox.create(template, { timeoutMs: 120000, ...opts })
  opened.push(sbx)
  return sbx
}
after(async () => {
  for (const s of opened) await s.kill().catch(() => {})
  for (const id of snapshots) await Sandbox.deleteSnapshot(id).catch(() => {})
})

test('lifecycle: create, info, list by metadata, timeout, connect, kill', async () => {
  const tag = randomBytes(4).toString('hex')
  const sbx = await create({ metadata: { suite: tag } })
  assert.ok(sbx.sandboxId)
  assert.equal(await sbx.isRunning(), true)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.templateId, TEMPLATE)
  assert.deepEqual(info.metadata, { suite: tag })
  assert.equal(info.state, 'running')
  const page = Sandbox.list({ query: { metadata: { suite: tag } } })
  const items = await page.nextItems()
  assert.deepEqual(items.map(s => s.sandboxId), [sbx.sandboxId])
  // connect from a second SDK instance: same sandbox, same access token.
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.commands.run('echo again')).stdout, 'again\n')
  // A short timeout ends it.
  await sbx.setTimeout(2000)
  await new Promise(resolve => setTimeout(resolve, 4500))
  assert.equal(await sbx.isRunning(), false)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.connect(sbx.sandboxId), e => e instanceof NotFoundError || e instanceof SandboxError)
})

test('pause: processes stop, state and listing say paused, connect resumes them as they were', async () => {
  const sbx = await create()
  const bg = await sbx.commands.run('i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done', { background: true })
  await sbx.commands.run('sleep 0.5; echo kept > /tmp/file')
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.isRunning(), false)
  assert.equal((await sbx.getInfo()).state, 'paused')
  const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
  assert.ok(paused.some(s => s.sandboxId === sbx.sandboxId))
  const running = await Sandbox.list({ query: { state: ['running'] } }).nextItems()
  assert.ok(!running.some(s => s.sandboxId === sbx.sandboxId))
  assert.equal(await Sandbox.pause(sbx.sandboxId), false) // already paused: 409
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal(await again.isRunning(), true)
  const a = Number((await again.commands.run('cat /tmp/count')).stdout)
  await new Promise(resolve => setTimeout(resolve, 600))
  const b = Number((await again.commands.run('cat /tmp/count')).stdout)
  assert.ok(b > a, `the counter runs on after the resume (${a} then ${b})`)
  assert.equal((await again.files.read('/tmp/file')), 'kept\n')
  const ps = await again.commands.list()
  assert.ok(ps.some(p => p.pid === bg.pid), 'the same background process')
  await again.commands.kill(bg.pid)
})

test('getMetrics: one sample; 64 MiB in /tmp shows in memUsed and diskUsed', async () => {
  const sbx = await create()
  const [before] = await sbx.getMetrics()
  assert.ok(before.timestamp instanceof Date && Math.abs(before.timestamp - Date.now()) < 10000)
  assert.equal(before.cpuCount, 1)
  assert.ok(before.cpuUsedPct >= 0 && before.cpuUsedPct <= 100)
  if (ISOLATION === 'jail') {
    assert.equal(before.memTotal, 512 * 1024 * 1024)
  } else {
    // The guest's MemTotal: a little under the VM's RAM.
    assert.ok(before.memTotal > 400 * 1024 * 1024 && before.memTotal <= 512 * 1024 * 1024, `${before.memTotal}`)
  }
  assert.ok(before.diskTotal > 0)
  await sbx.commands.run('head -c 67108864 /dev/zero > /tmp/big')
  const samples = await sbx.getMetrics({ start: new Date(Date.now() - 60000), end: new Date() })
  assert.equal(samples.length, 1)
  const MiB = 1024 * 1024
  assert.ok(samples[0].diskUsed >= before.diskUsed + 63 * MiB, `${before.diskUsed} -> ${samples[0].diskUsed}`)
  assert.ok(samples[0].memUsed >= before.memUsed + 60 * MiB, `${before.memUsed} -> ${samples[0].memUsed}`)
  await assert.rejects(Sandbox.getMetrics(UNKNOWN_ID), SandboxNotFoundError)
})

test('list paginates with limit and next token', async () => {
  const tag = randomBytes(4).toString('hex')
  const made = [await create({ metadata: { page: tag } }), await create({ metadata: { page: tag } }),
    await create({ metadata: { page: tag } })]
  const paginator = Sandbox.list({ query: { metadata: { page: tag } }, limit: 2 })
  const first = await paginator.nextItems()
  assert.equal(first.length, 2)
  assert.equal(paginator.hasNext, true)
  const second = await paginator.nextItems()
  assert.equal(second.length, 1)
  assert.equal(paginator.hasNext, false)
  assert.deepEqual([...first, ...second].map(s => s.sandboxId).sort(), made.map(s => s.sandboxId).sort())
  for (const s of made) assert.equal(await s.kill(), true)
})

test('commands: output, env, exit codes, stdin, background, connect, kill', async () => {
  const sbx = await create({ envs: { GLOBAL: 'g' } })
  const r = await sbx.commands.run('echo "$GLOBAL $FOO"; echo err >&2', { envs: { FOO: 'f' } })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'g f\n')
  assert.equal(r.stderr, 'err\n')
  // Per-command envs do not leak into the next command.
  assert.equal((await sbx.commands.run('echo "[$FOO]"')).stdout, '[]\n')
  await assert.rejects(sbx.commands.run('exit 3'), e => e instanceof CommandExitError && e.exitCode === 3 &&
    e.error === 'exit status 3')
  // Streamed output reaches the callbacks as it comes.
  const seen = []
  await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.1; done', { onStdout: d => seen.push(d) })
  assert.equal(seen.join(''), '1\n2\n3\n')
  // stdin: sendStdin then closeStdin; cat echoes and exits 0.
  const cat = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(cat.pid, 'typed\n')
  await sbx.commands.closeStdin(cat.pid)
  const catDone = await cat.wait()
  assert.equal(catDone.stdout, 'typed\n')
  // A background process is listed, re-attached by pid, and killed.
  const bg = await sbx.commands.run('echo started; sleep 60', { background: true })
  const listed = await sbx.commands.list()
  assert.ok(listed.some(p => p.pid === bg.pid && p.cmd === '/bin/bash'), JSON.stringify(listed))
  const re = await sbx.commands.connect(bg.pid)
  assert.equal(re.pid, bg.pid)
  assert.equal(await sbx.commands.kill(bg.pid), true)
  await assert.rejects(re.wait(), e => e instanceof CommandExitError)
  assert.equal(await sbx.commands.kill(bg.pid), false)
  // The killed pid is gone inside the sandbox (reaped, not a zombie).
  await assert.rejects(sbx.commands.run(`kill -0 ${bg.pid}`), CommandExitError)
  await assert.rejects(sbx.commands.connect(999999), NotFoundError)
})

test('pty: create, input, resize, exit', async () => {
  const sbx = await create()
  let out = ''
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: d => { out += new TextDecoder().decode(d) } })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'))
  for (let i = 0; i < 100 && !out.includes('24 80'); i++) await new Promise(resolve => setTimeout(resolve, 50))
  assert.ok(out.includes('24 80'), out)
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size\n'))
  for (let i = 0; i < 100 && !out.includes('30 100'); i++) await new Promise(resolve => setTimeout(resolve, 50))
  assert.ok(out.includes('30 100'), out)
  await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('exit\n'))
  const done = await pty.wait()
  assert.equal(done.exitCode, 0)
})

test('files: write, read, list, exists, info, makeDir, rename, remove', async () => {
  const sbx = await create()
  const info = await sbx.files.write('/tmp/e2b/a.txt', 'hello')
  assert.equal(info.path, '/tmp/e2b/a.txt')
  assert.equal(await sbx.files.read('/tmp/e2b/a.txt'), 'hello')
  const big = randomBytes(3 << 20)
  await sbx.files.write('/tmp/e2b/big.bin', big)
  assert.ok(Buffer.from(await sbx.files.read('/tmp/e2b/big.bin', { format: 'bytes' })).equals(big))
  // gzip both ways.
  const text = 'compress me '.repeat(50000)
  await sbx.files.write('/tmp/e2b/gz.txt', text, { gzip: true })
  assert.equal(await sbx.files.read('/tmp/e2b/gz.txt'), text)
  assert.equal(await sbx.files.read('/tmp/e2b/gz.txt', { gzip: true }), text)
  await sbx.files.write('/tmp/e2b/empty', '')
  assert.equal(await sbx.files.read('/tmp/e2b/empty'), '')
  const many = await sbx.files.write([{ path: '/tmp/e2b/m/1.txt', data: 'one' }, { path: '/tmp/e2b/m/2.txt', data: 'two' }])
  assert.deepEqual(many.map(f => f.path), ['/tmp/e2b/m/1.txt', '/tmp/e2b/m/2.txt'])
  assert.equal(await sbx.files.read('/tmp/e2b/m/2.txt'), 'two')
  const listed = await sbx.files.list('/tmp/e2b')
  assert.deepEqual(listed.map(e => e.name), ['a.txt', 'big.bin', 'empty', 'gz.txt', 'm'])
  assert.equal(listed.find(e => e.name === 'm').type, 'dir')
  assert.equal(listed.find(e => e.name === 'a.txt').size, 5)
  const deep = await sbx.files.list('/tmp/e2b', { depth: 2 })
  assert.ok(deep.some(e => e.path === '/tmp/e2b/m/1.txt'))
  assert.equal(await sbx.files.exists('/tmp/e2b/a.txt'), true)
  assert.equal(await sbx.files.exists('/tmp/e2b/none'), false)
  const st = await sbx.files.getInfo('/tmp/e2b/a.txt')
  assert.equal(st.permissions, '-rw-r--r--')
  assert.equal(st.owner, 'root')
  assert.equal(st.group, 'root')
  await sbx.commands.run('ln -s ../e2b/a.txt /tmp/e2b/link')
  const link = await sbx.files.getInfo('/tmp/e2b/link')
  assert.equal(link.type, 'symlink')
  assert.equal(link.symlinkTarget, '/tmp/e2b/a.txt')
  await sbx.files.remove('/tmp/e2b/link')
  assert.equal(await sbx.files.makeDir('/tmp/e2b/new/deeper'), true)
  assert.equal(await sbx.files.makeDir('/tmp/e2b/new/deeper'), false)
  const moved = await sbx.files.rename('/tmp/e2b/a.txt', '/tmp/e2b/b.txt')
  assert.equal(moved.path, '/tmp/e2b/b.txt')
  await sbx.files.remove('/tmp/e2b/b.txt')
  await sbx.files.remove('/tmp/e2b/b.txt')  // already gone: not an error
  assert.equal(await sbx.files.exists('/tmp/e2b/b.txt'), false)
  await assert.rejects(sbx.files.read('/tmp/e2b/none'), FileNotFoundError)
  await assert.rejects(sbx.files.rename('/tmp/e2b/none', '/tmp/e2b/x'), FileNotFoundError)
})

// Resolves once `cond()` holds; fails after `ms`.
async function waitFor (cond, what, ms = 30000) {
  for (const end = Date.now() + ms; !cond();) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

test('watchDir: changes as they happen, new subdirectories followed, entries, stop, timeout, errors', async () => {
  const sbx = await create()
  await sbx.files.makeDir('/tmp/w/old')
  const seen = []
  const has = (name, type) => seen.some(e => e.name === name && e.type === type)
  const handle = await sbx.files.watchDir('/tmp/w', e => { seen.push(e) }, { recursive: true, includeEntry: true })
  await sbx.commands.run('echo hi > /tmp/w/a.txt; mkdir /tmp/w/new; chmod 600 /tmp/w/a.txt')
  await waitFor(() => has('a.txt', FilesystemEventType.CHMOD) && has('new', FilesystemEventType.CREATE), 'the first events')
  assert.ok(has('a.txt', FilesystemEventType.CREATE))
  assert.ok(has('a.txt', FilesystemEventType.WRITE))
  const created = seen.find(e => e.name === 'a.txt' && e.type === FilesystemEventType.CREATE)
  assert.equal(created.entry?.path, '/tmp/w/a.txt')
  assert.equal(created.entry?.type, 'file')
  // A directory created after the watch began is watched too; one removed
  // is reported by its name.
  await sbx.commands.run('echo deep > /tmp/w/new/b.txt; mv /tmp/w/new/b.txt /tmp/w/new/c.txt; rm -r /tmp/w/old')
  await waitFor(() => has('new/c.txt', FilesystemEventType.CREATE) && has('old', FilesystemEventType.REMOVE), 'the events below new/')
  assert.ok(has('new/b.txt', FilesystemEventType.CREATE))
  assert.ok(has('new/b.txt', FilesystemEventType.RENAME))
  await handle.stop()
  const count = seen.length
  await sbx.files.write('/tmp/w/after.txt', 'x')
  await new Promise(resolve => setTimeout(resolve, 500))
  assert.equal(seen.length, count, 'no event after stop')

  // Not recursive (the SDK's default): a subdirectory's inside is not watched.
  const flat = []
  const h2 = await sbx.files.watchDir('/tmp/w', e => { flat.push(e) })
  await sbx.commands.run('echo x > /tmp/w/new/d.txt; echo y > /tmp/w/top.txt')
  await waitFor(() => flat.some(e => e.name === 'top.txt'), 'top.txt')
  assert.ok(!flat.some(e => e.name.startsWith('new/')), JSON.stringify(flat))
  assert.equal(flat[0].entry, undefined, 'entries only when asked')
  await h2.stop()

  // The watch ends at its timeout, and onExit hears of it.
  let exited
  await sbx.files.watchDir('/tmp/w', () => {}, { timeoutMs: 1000, onExit: err => { exited = err ?? 'clean' } })
  await waitFor(() => exited !== undefined, 'onExit at the timeout', 15000)

  await assert.rejects(sbx.files.watchDir('/tmp/none', () => {}), FileNotFoundError)
  await assert.rejects(sbx.files.watchDir('/tmp/w/top.txt', () => {}), InvalidArgumentError)
})

test('file metadata: X-Metadata headers become e2b xattrs, read back by getInfo and list', async () => {
  // python3 reads and sets the xattrs from inside the sandbox. The jail keeps
  // them as user.e2b.*; a microVM's guest tmpfs (Linux 6.1) keeps no user
  // attributes, so there they are trusted.e2b.*, which need CAP_SYS_ADMIN:
  // the agent's alone, since no process of the sandbox has it, root included.
  const sbx = await create({}, 'python')
  const vm = ISOLATION === 'microvm'
  const asRoot = { user: 'root' }
  // Where the sandbox's files live (the overlay's writable layer) and /tmp.
  for (const dir of ['/root/meta', '/tmp/meta']) {
    const [written] = await sbx.files.write([{ path: `${dir}/a.txt`, data: 'one' }], { metadata: { Owner: 'Alice', tag: 'x y' } })
    assert.deepEqual(written.metadata, { owner: 'Alice', tag: 'x y' }, `${dir}: keys lower-cased`)
    // Stored as extended attributes on the file itself.
    const attrs = await sbx.commands.run(`python3 -c "import os; p='${dir}/a.txt'; print(sorted((n, os.getxattr(p, n).decode()) for n in os.listxattr(p)))"`, asRoot)
    assert.equal(attrs.stdout.trim(), vm ? '[]' : "[('user.e2b.owner', 'Alice'), ('user.e2b.tag', 'x y')]")
    assert.deepEqual((await sbx.files.getInfo(`${dir}/a.txt`)).metadata, { owner: 'Alice', tag: 'x y' })
    // Raw (octet-stream) uploads carry them too, and every file of a multi-file write gets them.
    const [raw] = await sbx.files.write([{ path: `${dir}/raw.bin`, data: 'bytes' }], { metadata: { k: 'v' }, useOctetStream: true })
    assert.deepEqual(raw.metadata, { k: 'v' })
    const many = await sbx.files.write([{ path: `${dir}/m1`, data: '1' }, { path: `${dir}/m2`, data: '2' }], { metadata: { both: 'yes' } })
    assert.deepEqual(many.map(f => f.metadata), [{ both: 'yes' }, { both: 'yes' }])
    const listed = await sbx.files.list(dir)
    assert.deepEqual(listed.find(e => e.name === 'm2').metadata, { both: 'yes' })
    if (vm) {
      // The sandbox's root can neither set nor see them.
      await assert.rejects(
        sbx.commands.run(`python3 -c "import os; os.setxattr('${dir}/m1', 'trusted.e2b.from-inside', b'x')"`, asRoot),
        e => e instanceof CommandExitError && e.exitCode === 1 && /PermissionError/.test(e.stderr))
      assert.deepEqual((await sbx.files.getInfo(`${dir}/m1`)).metadata, { both: 'yes' })
    } else {
      // Set from inside the sandbox by other means: shown.
      await sbx.commands.run(`python3 -c "import os; os.setxattr('${dir}/m1', 'user.e2b.from-inside', b'set by python')"`)
      assert.deepEqual((await sbx.files.getInfo(`${dir}/m1`)).metadata, { both: 'yes', 'from-inside': 'set by python' })
    }
    // An upload without metadata clears the old.
    const [plain] = await sbx.files.write([{ path: `${dir}/a.txt`, data: 'two' }])
    assert.equal(plain.metadata, undefined)
    assert.equal((await sbx.files.getInfo(`${dir}/a.txt`)).metadata, undefined)
    assert.equal(await sbx.files.read(`${dir}/a.txt`), 'two')
  }
  // Bad keys or values the SDK would refuse client-side: envd's 400.
  const url = `${process.env.E2B_SANDBOX_URL}/files?path=/tmp/meta/bad.txt`
  const headers = { 'content-type': 'application/octet-stream', 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': sbx.envdAccessToken ?? '' }
  for (const [name, value] of [['X-Metadata-k', 'x'.repeat(2000)], ['X-Metadata-k', 'tab\there']]) {
    const res = await fetch(url, { method: 'POST', headers: { ...headers, [name]: value }, body: 'data' })
    assert.equal(res.status, 400, `${name}: ${value.slice(0, 20)}`)
  }
  assert.equal(await sbx.files.exists('/tmp/meta/bad.txt'), false)
})

// A Connect unary call of envd's Filesystem service, as the Python SDK's
// sync client makes it (JSON codec): [status, body].
async function filesystemCall (sbx, method, body) {
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json', 'connect-protocol-version': '1',
      'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983', 'x-access-token': sbx.envdAccessToken ?? ''
    },
    body: JSON.stringify(body)
  })
  return [res.status, await res.json()]
}

test('polled watchers: CreateWatcher, GetWatcherEvents, RemoveWatcher (the Python SDK\'s watchDir)', async () => {
  const sbx = await create()
  await sbx.files.makeDir('/tmp/pw/sub')
  const [st, created] = await filesystemCall(sbx, 'CreateWatcher', { path: '/tmp/pw', recursive: true, includeEntry: true })
  assert.equal(st, 200, JSON.stringify(created))
  const id = created.watcherId
  assert.match(id, /^[0-9a-f]{32}$/)
  const [, empty] = await filesystemCall(sbx, 'GetWatcherEvents', { watcherId: id })
  assert.deepEqual(empty.events ?? [], [])
  // A quiet watch stays set (it once ended after a second without events).
  await new Promise(resolve => setTimeout(resolve, 2500))
  await sbx.commands.run('echo hi > /tmp/pw/a.txt; echo deep > /tmp/pw/sub/b.txt; rm /tmp/pw/a.txt')
  const seen = []
  const has = (name, type) => seen.some(e => e.name === name && e.type === type)
  for (const end = Date.now() + 30000; !(has('a.txt', 'EVENT_TYPE_REMOVE') && has('sub/b.txt', 'EVENT_TYPE_WRITE'));) {
    assert.ok(Date.now() < end, `timed out waiting for the events: ${JSON.stringify(seen)}`)
    const [s, got] = await filesystemCall(sbx, 'GetWatcherEvents', { watcherId: id })
    assert.equal(s, 200, JSON.stringify(got))
    seen.push(...(got.events ?? []))
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  assert.ok(has('a.txt', 'EVENT_TYPE_CREATE'), JSON.stringify(seen))
  const sub = seen.find(e => e.name === 'sub/b.txt' && e.type === 'EVENT_TYPE_CREATE')
  assert.equal(sub?.entry?.path, '/tmp/pw/sub/b.txt', 'entries when asked')
  // Each event is answered once.
  await sbx.commands.run('echo again > /tmp/pw/c.txt')
  const later = []
  for (const end = Date.now() + 30000; !later.some(e => e.name === 'c.txt');) {
    assert.ok(Date.now() < end, 'timed out waiting for c.txt')
    const [, got] = await filesystemCall(sbx, 'GetWatcherEvents', { watcherId: id })
    later.push(...(got.events ?? []))
  }
  assert.ok(!later.some(e => e.name === 'a.txt'), JSON.stringify(later))

  const [rs, removed] = await filesystemCall(sbx, 'RemoveWatcher', { watcherId: id })
  assert.equal(rs, 200, JSON.stringify(removed))
  // A removed or unknown id: not_found, as E2B answers.
  for (const method of ['GetWatcherEvents', 'RemoveWatcher']) {
    const [s, err] = await filesystemCall(sbx, method, { watcherId: id })
    assert.equal(s, 404, JSON.stringify(err))
    assert.equal(err.code, 'not_found')
  }
  // The watch's own errors: a missing directory, a file.
  const [ms, missing] = await filesystemCall(sbx, 'CreateWatcher', { path: '/tmp/none' })
  assert.equal(ms, 404)
  assert.equal(missing.code, 'not_found')
  await sbx.files.write('/tmp/pw/file', 'x')
  const [fs, file] = await filesystemCall(sbx, 'CreateWatcher', { path: '/tmp/pw/file' })
  assert.equal(fs, 400)
  assert.equal(file.code, 'invalid_argument')
  // Another sandbox's watcher is not this one's.
  const [, mine] = await filesystemCall(sbx, 'CreateWatcher', { path: '/tmp/pw' })
  const other = await create()
  const [os, foreign] = await filesystemCall(other, 'GetWatcherEvents', { watcherId: mine.watcherId })
  assert.equal(os, 404, JSON.stringify(foreign))
  // The directory going away ends the watch: its last events, then not_found.
  await sbx.commands.run('rm -r /tmp/pw')
  let last
  for (const end = Date.now() + 30000; ;) {
    assert.ok(Date.now() < end, 'timed out waiting for the end of the watch')
    const [s, got] = await filesystemCall(sbx, 'GetWatcherEvents', { watcherId: mine.watcherId })
    if (s !== 200) { last = [s, got]; break }
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  assert.equal(last[0], 404, JSON.stringify(last[1]))
  // The sandbox's kill removes its watchers: its envd is gone (502).
  const [, kept] = await filesystemCall(other, 'CreateWatcher', { path: '/tmp' })
  await other.kill()
  const [ks] = await filesystemCall(other, 'GetWatcherEvents', { watcherId: kept.watcherId })
  assert.equal(ks, 502)
})

test('signed URLs: download and upload without headers, expiry, exact refusals', async () => {
  const sbx = await create({ secure: true })
  await sbx.files.write('/tmp/signed.txt', 'signed content')
  const root = new URL(process.env.E2B_SANDBOX_URL).origin
  const down = await sbx.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: 60000 })
  assert.ok(down.startsWith(root + '/files?'), down)
  const got = await fetch(down)
  assert.equal(got.status, 200)
  assert.equal(await got.text(), 'signed content')
  const up = await sbx.uploadUrl('/tmp/uploaded.txt')
  const form = new FormData()
  form.append('file', new Blob(['from a signed url']), '/tmp/uploaded.txt')
  const put = await fetch(up, { method: 'POST', body: form })
  assert.equal(put.status, 200, await put.clone().text())
  assert.equal(await sbx.files.read('/tmp/uploaded.txt'), 'from a signed url')
  // A signature for another path, a forged one and a missing one.
  const other = new URL(down)
  other.searchParams.set('path', '/etc/passwd')
  const refused = await fetch(other)
  assert.equal(refused.status, 401)
  assert.deepEqual(await refused.json(), { code: 401, message: 'invalid signature' })
  const missing = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/tmp/signed.txt`, {
    headers: { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983' }
  })
  assert.equal(missing.status, 401)
  assert.deepEqual(await missing.json(), { code: 401, message: 'missing signature query parameter' })
  // An expired signature (made with the token the SDK holds).
  const expired = await sbx.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: -10000 })
  const late = await fetch(expired)
  assert.equal(late.status, 401)
  assert.deepEqual(await late.json(), { code: 401, message: 'signature is already expired' })
})

// A GET through node's http client: {status, headers, body}.
function get (opts) {
  return new Promise((resolve, reject) => {
    const req = http.request({ method: 'GET', agent: false, ...opts }, res => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', c => { body += c })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}
// Resolves every name to the daemon's loopback: what wildcard DNS would do
// for getHost(port)'s names.
const toLoopback = (hostname, options, cb) =>
  options?.all ? cb(null, [{ address: '127.0.0.1', family: 4 }]) : cb(null, '127.0.0.1', 4)

test('ports: getHost(port) by Host header, by a custom lookup and by E2B headers; 502 when nothing listens or the sandbox is gone', async () => {
  // python3 is in the python image (the code interpreter's would also
  // start its own server first).
  const sbx = await create({}, 'python')
  const id = sbx.sandboxId
  await sbx.files.write('/tmp/www/hello.txt', 'hello through port 8000')
  await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1', { background: true, cwd: '/tmp/www' })
  const daemon = new URL(process.env.E2B_SANDBOX_URL)
  const byHeaders = (port, path) => fetch(`${process.env.E2B_SANDBOX_URL}${path}`, {
    headers: { 'e2b-sandbox-id': id, 'e2b-sandbox-port': String(port) }
  })
  // The server takes a moment to listen: 502 until then.
  let res
  for (let i = 0; i < 150; i++) {
    res = await byHeaders(8000, '/hello.txt')
    if (res.status !== 502) break
    await res.body?.cancel()
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'hello through port 8000')

  // An explicit Host header of getHost's form, on the daemon's own address.
  const viaHost = await get({
    host: daemon.hostname, port: daemon.port, path: '/hello.txt', headers: { host: `8000-${id}.localhost` }
  })
  assert.equal(viaHost.status, 200)
  assert.equal(viaHost.body, 'hello through port 8000')
  assert.match(viaHost.headers.server ?? '', /SimpleHTTP/, 'the answer is the server\'s')

  // The SDK's own name, resolved to the daemon by a custom lookup.
  const host = sbx.getHost(8000)
  assert.ok(host.startsWith(`8000-${id}.`), host)
  const viaLookup = await get({ host, port: daemon.port, path: '/hello.txt', lookup: toLoopback })
  assert.equal(viaLookup.status, 200)
  assert.equal(viaLookup.body, 'hello through port 8000')
  const missing = await get({ host, port: daemon.port, path: '/nope.txt', lookup: toLoopback })
  assert.equal(missing.status, 404, 'the server\'s own status passes through')

  // Nothing listens on 8001.
  const closed = await byHeaders(8001, '/')
  assert.equal(closed.status, 502)
  const why = await closed.json()
  assert.equal(why.sandboxId, id)
  assert.equal(why.code, 502)
  assert.match(why.message, /nothing listens on port 8001/)
  const closedByHost = await get({ host: sbx.getHost(8001), port: daemon.port, path: '/', lookup: toLoopback })
  assert.equal(closedByHost.status, 502)

  // A killed sandbox: E2B's proxy answer.
  await sbx.kill()
  const gone = await get({ host, port: daemon.port, path: '/hello.txt', lookup: toLoopback })
  assert.equal(gone.status, 502)
  assert.deepEqual(JSON.parse(gone.body), { sandboxId: id, message: 'The sandbox was not found', code: 502 })
  const goneByHeaders = await byHeaders(8000, '/hello.txt')
  assert.equal(goneByHeaders.status, 502)
  assert.equal((await goneByHeaders.json()).message, 'The sandbox was not found')
})

test('ports: an answer streams as the server writes it', async () => {
  const sbx = await create({}, 'python')
  const server = [
    'import http.server, time',
    'class H(http.server.BaseHTTPRequestHandler):',
    '    protocol_version = "HTTP/1.1"',
    '    def do_GET(self):',
    '        self.send_response(200)',
    '        self.send_header("Content-Type", "application/x-ndjson")',
    '        self.send_header("Transfer-Encoding", "chunked")',
    '        self.end_headers()',
    '        for i in range(2):',
    '            line = (\'{"n": %d}\\n\' % i).encode()',
    '            self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(line), line))',
    '            self.wfile.flush()',
    '            time.sleep(1.5)',
    '        self.wfile.write(b"0\\r\\n\\r\\n")',
    'http.server.HTTPServer(("127.0.0.1", 8002), H).serve_forever()'
  ].join('\n')
  await sbx.files.write('/tmp/stream.py', server)
  await sbx.commands.run('python3 /tmp/stream.py', { background: true })
  const url = `${process.env.E2B_SANDBOX_URL}/events`
  const headers = { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8002' }
  let res
  for (let i = 0; i < 150; i++) {
    res = await fetch(url, { headers })
    if (res.status !== 502) break
    await res.body?.cancel()
    await new Promise(resolve => setTimeout(resolve, 200))
  }
  assert.equal(res.status, 200)
  assert.equal(res.headers.get('content-type'), 'application/x-ndjson')
  const reader = res.body.getReader()
  const start = Date.now()
  const first = await reader.read()
  const firstAt = Date.now() - start
  assert.equal(new TextDecoder().decode(first.value), '{"n": 0}\n')
  let rest = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    rest += new TextDecoder().decode(value)
  }
  const total = Date.now() - start
  assert.equal(rest, '{"n": 1}\n')
  assert.ok(total - firstAt >= 1000, `the first line came before the rest (${firstAt} ms, then ${total} ms)`)
})

test('errors: wrong API key, unknown sandbox, killed sandbox', async () => {
  const sbx = await create()
  // e2b_run.sh configures an API key: another one is refused.
  await assert.rejects(Sandbox.create(TEMPLATE, { apiKey: 'wrong', timeoutMs: 10000 }).then(s => opened.push(s)),
    AuthenticationError)
  // Another SDK instance without the sandbox's access token is refused by envd.
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/Stat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983' },
    body: JSON.stringify({ path: '/' })
  })
  assert.equal(res.status, 401)
  assert.equal((await res.json()).code, 'unauthenticated')
  await assert.rejects(Sandbox.getInfo('00000000-0000-4000-8000-000000000000'), NotFoundError)
  await sbx.kill()
  assert.equal(await sbx.isRunning(), false)
  await assert.rejects(sbx.commands.run('echo no'))
})

test('snapshots: create, list, start sandboxes from one by id and by name, delete', async () => {
  const sbx = await create()
  await sbx.files.write('/tmp/snap/kept.txt', 'before the snapshot')
  await sbx.commands.run('mkdir -p /root/work && echo home > /root/work/h.txt && echo gone > /root/work/gone.txt')
  const name = `snap-${randomBytes(4).toString('hex')}`
  const named = await sbx.createSnapshot({ name })
  snapshots.push(named.snapshotId)
  assert.ok(named.snapshotId)
  assert.deepEqual(named.names, [name])
  const unnamed = await Sandbox.createSnapshot(sbx.sandboxId)
  snapshots.push(unnamed.snapshotId)
  assert.deepEqual(unnamed.names, [])
  assert.notEqual(unnamed.snapshotId, named.snapshotId)
  // The source runs on, and what it does next is not in the snapshot.
  assert.equal(await sbx.isRunning(), true)
  await sbx.files.write('/tmp/snap/kept.txt', 'after the snapshot')
  await sbx.files.remove('/root/work/gone.txt')
  await assert.rejects(sbx.createSnapshot({ name }), SandboxError) // the name is taken
  await assert.rejects(Sandbox.createSnapshot(UNKNOWN_ID), SandboxNotFoundError)

  // Listing: this sandbox's, by name, all, in pages.
  const mine = await sbx.listSnapshots().nextItems()
  assert.deepEqual(mine.map(s => s.snapshotId).sort(), [named.snapshotId, unnamed.snapshotId].sort())
  assert.deepEqual(await Sandbox.listSnapshots({ name }).nextItems(), [{ snapshotId: named.snapshotId, names: [name] }])
  const all = await Sandbox.listSnapshots().nextItems()
  assert.ok(all.some(s => s.snapshotId === unnamed.snapshotId))
  const pages = Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 })
  const first = await pages.nextItems()
  assert.equal(first.length, 1)
  assert.equal(pages.hasNext, true)
  const second = await pages.nextItems()
  assert.equal(second.length, 1)
  assert.equal(pages.hasNext, false)
  assert.deepEqual([...first, ...second].map(s => s.snapshotId).sort(), mine.map(s => s.snapshotId).sort())

  // Sandbox.create(<snapshot>): by id and by name, each with the files of
  // the snapshot's moment (not those changed or removed after it).
  const copies = []
  for (const ref of [named.snapshotId, name]) {
    const copy = await create({}, ref)
    copies.push(copy)
    assert.equal((await copy.getInfo()).templateId, ref)
    assert.equal(await copy.files.read('/tmp/snap/kept.txt'), 'before the snapshot')
    assert.equal(await copy.files.read('/root/work/h.txt'), 'home\n')
    assert.equal(await copy.files.read('/root/work/gone.txt'), 'gone\n')
    await copy.files.write('/tmp/snap/kept.txt', `changed in ${copy.sandboxId}`)
  }
  assert.equal(await copies[1].files.read('/tmp/snap/kept.txt'), `changed in ${copies[1].sandboxId}`)
  assert.equal(await sbx.files.read('/tmp/snap/kept.txt'), 'after the snapshot')

  // Delete: a jail started from a snapshot reads its files for its whole
  // life, so the snapshot is in use until its sandboxes are gone.
  if (ISOLATION === 'jail') {
    await assert.rejects(Sandbox.deleteSnapshot(name), e => e instanceof SandboxError && /409/.test(e.message))
    assert.equal((await Sandbox.listSnapshots({ name }).nextItems()).length, 1)
  }
  for (const c of copies) assert.equal(await c.kill(), true)
  assert.equal(await Sandbox.deleteSnapshot(name), true)
  assert.equal(await Sandbox.deleteSnapshot(name), false)
  assert.equal(await Sandbox.deleteSnapshot(named.snapshotId), false)
  assert.equal(await Sandbox.deleteSnapshot(unnamed.snapshotId), true)
  assert.deepEqual(await sbx.listSnapshots().nextItems(), [])
  // A deleted snapshot's name is no template any more.
  await assert.rejects(Sandbox.create(name, { timeoutMs: 10000 }).then(s => opened.push(s)), SandboxError)
})

test('fork: copies of the moment, each a sandbox of its own; unknown and killed sources', async () => {
  const tag = randomBytes(4).toString('hex')
  const sbx = await create({ metadata: { fork: tag }, envs: { GLOBAL: 'g' } })
  await sbx.files.write('/tmp/fork/state.txt', 'forked state')
  const bg = await sbx.commands.run('sleep 600', { background: true })
  const forks = await sbx.fork({ count: 2, timeoutMs: 120000 })
  assert.equal(forks.length, 2)
  for (const f of forks) {
    assert.ok(f instanceof Sandbox, String(f))
    opened.push(f)
  }
  assert.notEqual(forks[0].sandboxId, forks[1].sandboxId)
  for (const f of forks) {
    assert.notEqual(f.sandboxId, sbx.sandboxId)
    assert.equal(await f.isRunning(), true)
    const info = await f.getInfo()
    assert.equal(info.templateId, TEMPLATE)
    assert.deepEqual(info.metadata, { fork: tag })
    assert.equal(await f.files.read('/tmp/fork/state.txt'), 'forked state')
    assert.equal((await f.commands.run('echo "$GLOBAL"')).stdout, 'g\n')
    // A microVM's processes are copied too; a jail's files only.
    const listed = (await f.commands.list()).some(p => p.pid === bg.pid)
    assert.equal(listed, ISOLATION === 'microvm')
  }
  // Each copy is its own: a write in one is in neither the other nor the source.
  await forks[0].files.write('/tmp/fork/state.txt', 'changed in fork 0')
  assert.equal(await forks[1].files.read('/tmp/fork/state.txt'), 'forked state')
  assert.equal(await sbx.files.read('/tmp/fork/state.txt'), 'forked state')
  assert.equal(await sbx.isRunning(), true)
  assert.ok((await sbx.commands.list()).some(p => p.pid === bg.pid), 'the source runs on')
  const listed = await Sandbox.list({ query: { metadata: { fork: tag } } }).nextItems()
  assert.deepEqual(listed.map(s => s.sandboxId).sort(), [sbx.sandboxId, ...forks.map(f => f.sandboxId)].sort())

  // The static form, one copy by default, with a lifetime of its own.
  const [one, ...rest] = await Sandbox.fork(sbx.sandboxId, { timeoutMs: 3000 })
  assert.equal(rest.length, 0)
  assert.ok(one instanceof Sandbox, String(one))
  opened.push(one)
  assert.equal(await one.files.read('/tmp/fork/state.txt'), 'forked state')
  await new Promise(resolve => setTimeout(resolve, 5000))
  assert.equal(await one.isRunning(), false)
  assert.equal(await sbx.isRunning(), true)

  await assert.rejects(Sandbox.fork(UNKNOWN_ID), SandboxNotFoundError)
  await assert.rejects(sbx.fork({ count: 17 }), SandboxError)
  assert.equal(await sbx.kill(), true)
  await assert.rejects(sbx.fork(), SandboxNotFoundError)
})
