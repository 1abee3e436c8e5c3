// A fleet on one machine (docs/multihost.md): the engine double serving
// wss:// with a test CA, three jail hosts (`skiff serve --iii-namespace
// skiff.hN`, each with its own data directory), one router (`skiff route`),
// and the unmodified iii-sdk as the caller, which knows nothing of hosts; a
// fourth host lives in a network namespace of the test's own, behind a veth
// link the test takes down and up (a real partition). SKIFF_BIN,
// ENGINE_DOUBLE and FLEET_TLS_DIR (ca.pem, server.pem, server-key.pem; the
// server certificate also names PARTITION_IP) are set by fleet_run.sh, which
// also makes node trust ca.pem.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync, readFileSync, rmSync, openSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { connectCaller, sError } from './iii_caller.mjs'
import { createChannel } from 'iii-sdk/helpers'
import { ChannelReader } from 'iii-sdk/channel'
import { randomBytes, createHash } from 'node:crypto'

const SKIFF = process.env.SKIFF_BIN
const DOUBLE = process.env.ENGINE_DOUBLE
const TLS = process.env.FLEET_TLS_DIR
const CA = join(TLS, 'ca.pem')
// The engine as a partitioned host sees it: the root side of the veth link.
const PARTITION_IP = process.env.PARTITION_IP
const tmp = mkdtempSync(join(tmpdir(), 'skiff-fleet-'))
const procs = new Set()
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function freePort () {
  return new Promise(resolve => {
    const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)) })
  })
}

// A child whose output goes to a log file in tmp; `exited` settles with its status.
function start (name, argv, env = {}) {
  const log = join(tmp, `${name}.log`)
  const fd = openSync(log, 'a')
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd], env: { ...process.env, ...env } })
  child.exited = new Promise(resolve => child.on('exit', (code, sig) => resolve(code ?? 128 + (sig === 'SIGKILL' ? 9 : 15))))
  child.log = () => readFileSync(log, 'utf8')
  procs.add(child)
  child.exited.then(() => procs.delete(child))
  return child
}

async function waitFor (what, fn, ms = 60000) {
  const end = Date.now() + ms
  let last
  while (Date.now() < end) {
    try {
      const v = await fn()
      if (v) return v
    } catch (e) { last = e }
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`)
}

let engineUrl, engineport, rbacUrl, iii, call
const hosts = {}

async function startHost (name, max = 3) {
  const port = await freePort()
  const cfg = join(tmp, `${name}.yaml`)
  writeFileSync(cfg, `image_allowlist: [host]\nisolation: jail\nmax_concurrent_sandboxes: ${max}\n`)
  const child = start(name, [SKIFF, 'serve', '--port', String(port), '--config', cfg, '--engine', engineUrl,
    '--engine-ca', CA, '--iii-namespace', `skiff.${name}`], { XDG_DATA_HOME: join(tmp, `data-${name}`) })
  await waitFor(`${name} to listen`, async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200)
  return { child, port, ns: `skiff.${name}` }
}

function startRouter (name) {
  return start(name, [SKIFF, 'route', '--engine', engineUrl, '--engine-ca', CA, '--probe-ms', '200',
    '--probe-deadline-ms', '1000'], { SKIFF_LOG: 'info' })
}

// The hosts the router currently places on: each healthy host answers the catalog.
async function healthyHosts () {
  const c = await call('sandbox::catalog::list', {}, 5000)
  return new Set(c.images.map(i => i.host))
}

// Sandboxes a host holds, asked directly over its own HTTP API.
async function onHost (h) {
  const r = await fetch(`http://127.0.0.1:${h.port}/v1/functions/sandbox::list`, { method: 'POST', body: '{}' })
  return (await r.json()).sandboxes.map(s => s.sandbox_id)
}

before(async () => {
  // On every address, so the partitioned host reaches it over its veth link.
  // The callers' listener (docs/multihost.md#callers-see-only-the-default-sandbox-functions):
  // connections there are admitted by fleet::auth and see only the
  // default namespace's sandbox::*.
  const rbacPort = await freePort()
  const dbl = start('engine', [DOUBLE, '--port', '0', '--address', '0.0.0.0', '--tls-cert', join(TLS, 'server.pem'),
    '--tls-key', join(TLS, 'server-key.pem'), '--rbac-port', String(rbacPort), '--auth-function', 'fleet::auth',
    '--expose', 'match("sandbox::*")'])
  engineport = await waitFor('the engine double', () => /listening (\d+)/.exec(dbl.log())?.[1])
  engineUrl = `wss://127.0.0.1:${engineport}`
  rbacUrl = `wss://127.0.0.1:${rbacPort}`
  for (const n of ['h1', 'h2', 'h3']) hosts[n] = await startHost(n)
  hosts.router = startRouter('router')
  ;({ iii, call } = connectCaller(engineUrl, 'fleet-e2e'))
  // The auth function, served by a trusted worker on the internal listener:
  // a host's credential admits it to its own namespace only; a caller's
  // admits it to what the listener exposes.
  iii.registerFunction('fleet::auth', async ({ headers }) => {
    const token = String(headers?.authorization ?? '').replace(/^Bearer /, '')
    if (token === 'host-hq-credential') return { namespaces: { 'skiff.hq': ['*'] } }
    if (token === 'caller-credential') return { allow_function_registration: false }
    throw new Error('unknown credential')
  })
  await waitFor('three healthy hosts', async () => (await healthyHosts()).size === 3)
})

after(async () => {
  await iii?.shutdown()
  for (const p of procs) p.kill('SIGTERM')
  await Promise.all([...procs].map(p => p.exited))
  if (!process.exitCode) rmSync(tmp, { recursive: true, force: true })
})

test('creates spread over the hosts and every call reaches its sandbox\'s host', async () => {
  const made = []
  for (let i = 0; i < 3; i++) made.push(await call('sandbox::create', { image: 'host' }))
  assert.deepEqual(new Set(made.map(m => m.host)), new Set(['skiff.h1', 'skiff.h2', 'skiff.h3']))
  for (const m of made) {
    const h = Object.values(hosts).find(x => x.ns === m.host)
    assert.ok((await onHost(h)).includes(m.sandbox_id), `${m.sandbox_id} is not on ${m.host}`)
    await call('sandbox::fs::write', { sandbox_id: m.sandbox_id, path: '/tmp/who', content: m.host })
    const x = await call('sandbox::exec', { sandbox_id: m.sandbox_id, cmd: 'cat /tmp/who' })
    assert.equal(x.stdout, m.host)
  }
  const list = await call('sandbox::list', {})
  assert.equal(list.sandboxes.length, 3)
  for (const m of made) assert.equal(list.sandboxes.find(s => s.sandbox_id === m.sandbox_id)?.host, m.host)
  for (const m of made) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  assert.equal((await call('sandbox::list', {})).sandboxes.length, 0)
  const gone = await sError(call('sandbox::exec', { sandbox_id: made[0].sandbox_id, cmd: 'true' }))
  assert.equal(gone.code, 'S002')
})

// docs/multihost.md#limits: data channels are the engine's. A file goes
// caller → engine → host through a channel the caller made, and back through
// one the host made, the router passing only the references.
test('files stream through the engine\'s channels to and from a routed sandbox', async () => {
  const m = await call('sandbox::create', { image: 'host' })
  try {
    const data = randomBytes(8 << 20)
    const ch = await createChannel(iii)
    const pending = call('sandbox::fs::write', { sandbox_id: m.sandbox_id, path: '/tmp/big.bin', content: ch.readerRef })
    for (let off = 0; off < data.length; off += 65536) {
      if (!ch.writer.stream.write(data.subarray(off, off + 65536))) {
        await new Promise(resolve => ch.writer.stream.once('drain', resolve))
      }
    }
    ch.writer.stream.end()
    assert.equal((await pending).bytes_written, data.length)
    const r = await call('sandbox::fs::read', { sandbox_id: m.sandbox_id, path: '/tmp/big.bin' })
    assert.equal(r.size, data.length)
    assert.equal(r.body, undefined)
    const back = await new ChannelReader(engineUrl, r.content).readAll()
    assert.equal(createHash('sha256').update(back).digest('hex'), createHash('sha256').update(data).digest('hex'))
    await call('sandbox::fs::write', { sandbox_id: m.sandbox_id, path: '/tmp/s.txt', content: 'routed bytes' })
    const s = await call('sandbox::fs::read', { sandbox_id: m.sandbox_id, path: '/tmp/s.txt' })
    assert.equal(s.body, 'routed bytes')
    assert.equal((await new ChannelReader(engineUrl, s.content).readAll()).toString(), 'routed bytes')
  } finally {
    await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  }
})

test('a full fleet answers S400; one free slot anywhere is found', async () => {
  const made = []
  try {
    for (let i = 0; i < 9; i++) made.push(await call('sandbox::create', { image: 'host' }))
    const per = {}
    for (const m of made) per[m.host] = (per[m.host] ?? 0) + 1
    assert.deepEqual(per, { 'skiff.h1': 3, 'skiff.h2': 3, 'skiff.h3': 3 })
    const full = await sError(call('sandbox::create', { image: 'host' }))
    assert.equal(full.code, 'S400')
    const freed = made.splice(4, 1)[0]
    await call('sandbox::stop', { sandbox_id: freed.sandbox_id, wait: true })
    const again = await call('sandbox::create', { image: 'host' })
    made.push(again)
    assert.equal(again.host, freed.host)
  } finally {
    for (const m of made) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true }).catch(() => {})
  }
})

test('a stopped (partitioned) host gets no new sandboxes, and is used again when it answers', async () => {
  process.kill(hosts.h2.child.pid, 'SIGSTOP')
  try {
    await waitFor('h2 to be left out', async () => !(await healthyHosts()).has('skiff.h2'), 20000)
    const made = []
    for (let i = 0; i < 4; i++) made.push(await call('sandbox::create', { image: 'host' }))
    assert.ok(made.every(m => m.host !== 'skiff.h2'), JSON.stringify(made))
    for (const m of made) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  } finally {
    process.kill(hosts.h2.child.pid, 'SIGCONT')
  }
  await waitFor('h2 to be healthy again', async () => (await healthyHosts()).has('skiff.h2'), 20000)
})

// A real partition: host hp runs in a network namespace of its own and
// reaches the engine over a veth pair (wss:// to PARTITION_IP). With the
// link down its connection stays open but carries nothing: the router's
// probe goes unanswered, hp gets no new sandboxes; with the link up again
// the same connection carries on, and hp's sandbox answers.
test('a host behind a veth link taken down is left out, and heals when the link is back', async () => {
  const ns = `skiff-fleet-${process.pid}`
  const rootSide = `sfr${process.pid % 100000}`
  const hostSide = `sfh${process.pid % 100000}`
  const ip = (...args) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  const hostIp = PARTITION_IP.replace(/\.\d+$/, m => `.${Number(m.slice(1)) + 1}`)
  ip('netns', 'add', ns)
  let hp
  try {
    ip('link', 'add', rootSide, 'type', 'veth', 'peer', 'name', hostSide, 'netns', ns)
    ip('addr', 'add', `${PARTITION_IP}/30`, 'dev', rootSide)
    ip('link', 'set', rootSide, 'up')
    ip('-n', ns, 'addr', 'add', `${hostIp}/30`, 'dev', hostSide)
    ip('-n', ns, 'link', 'set', hostSide, 'up')
    ip('-n', ns, 'link', 'set', 'lo', 'up')
    const cfg = join(tmp, 'hp.yaml')
    writeFileSync(cfg, 'image_allowlist: [host]\nisolation: jail\nmax_concurrent_sandboxes: 3\n')
    // nsenter switches only the network namespace (`ip netns exec` would
    // also remount /sys, hiding the cgroups the jail needs).
    hp = start('hp', ['nsenter', `--net=/run/netns/${ns}`, SKIFF, 'serve', '--port', String(await freePort()),
      '--config', cfg, '--engine', `wss://${PARTITION_IP}:${engineport}`, '--engine-ca', CA,
      '--iii-namespace', 'skiff.hp'], { XDG_DATA_HOME: join(tmp, 'data-hp'), SKIFF_LOG: 'info' })
    await waitFor('hp to join over its veth link', async () => (await healthyHosts()).has('skiff.hp'))
    // Creates spread over the emptiest hosts: one of the first few lands on hp.
    const first = []
    for (let i = 0; i < 4 && !first.some(m => m.host === 'skiff.hp'); i++) {
      first.push(await call('sandbox::create', { image: 'host' }))
    }
    const mine = first.find(m => m.host === 'skiff.hp')
    assert.ok(mine, `no sandbox landed on hp: ${JSON.stringify(first)}`)
    for (const m of first) if (m !== mine) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })

    ip('link', 'set', rootSide, 'down')
    const cut = Date.now()
    await waitFor('hp to be left out', async () => !(await healthyHosts()).has('skiff.hp'), 30000)
    console.log(`# partition detected after ${Date.now() - cut} ms (probe deadline 1000 ms)`)
    const made = []
    for (let i = 0; i < 3; i++) made.push(await call('sandbox::create', { image: 'host' }))
    assert.ok(made.every(m => m.host !== 'skiff.hp'), JSON.stringify(made))
    for (const m of made) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })

    ip('link', 'set', rootSide, 'up')
    await waitFor('hp to be healthy again', async () => (await healthyHosts()).has('skiff.hp'), 60000)
    const x = await call('sandbox::exec', { sandbox_id: mine.sandbox_id, cmd: 'echo across' })
    assert.equal(x.stdout, 'across\n')
    await call('sandbox::stop', { sandbox_id: mine.sandbox_id, wait: true })
    assert.equal(hp.log().match(/registered with the engine/g)?.length, 1, 'hp reconnected instead of healing\n' +
      hp.log())
  } finally {
    if (hp) {
      hp.kill('SIGTERM')
      await hp.exited
      await waitFor('hp to be gone from the fleet', async () => !(await healthyHosts()).has('skiff.hp'))
    }
    try { ip('link', 'del', rootSide) } catch {}
    ip('netns', 'del', ns)
  }
})

test('SIGKILL of a host mid-exec: its sandboxes are "host lost", creates avoid it, and it rejoins', async () => {
  const first = []
  for (let i = 0; i < 3; i++) first.push(await call('sandbox::create', { image: 'host' }))
  const mine = first.find(m => m.host === 'skiff.h1')
  assert.ok(mine, `no sandbox landed on h1: ${JSON.stringify(first)}`)
  for (const m of first) if (m !== mine) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  const running = sError(call('sandbox::exec', { sandbox_id: mine.sandbox_id, cmd: 'sleep 30' }))
  await sleep(500)
  hosts.h1.child.kill('SIGKILL')
  await hosts.h1.child.exited
  const cut = await running
  assert.ok(['S301', 'S300'].includes(cut.code), JSON.stringify(cut))
  const lost = await sError(call('sandbox::exec', { sandbox_id: mine.sandbox_id, cmd: 'true' }))
  assert.equal(lost.code, 'S301')
  assert.match(lost.message, /host lost: .*skiff\.h1/)
  const unknown = await sError(call('sandbox::exec', { sandbox_id: '11111111-2222-4333-8444-555555555555', cmd: 'true' }))
  assert.equal(unknown.code, 'S002')
  const made = []
  for (let i = 0; i < 3; i++) made.push(await call('sandbox::create', { image: 'host' }))
  assert.ok(made.every(m => m.host !== 'skiff.h1'))
  // Back with a new boot: used again; the old sandbox stays lost.
  hosts.h1 = await startHost('h1')
  await waitFor('h1 back', async () => (await healthyHosts()).has('skiff.h1'))
  const after = await sError(call('sandbox::exec', { sandbox_id: mine.sandbox_id, cmd: 'true' }))
  assert.equal(after.code, 'S301')
  const onH1 = await call('sandbox::create', { image: 'host' })
  assert.equal(onH1.host, 'skiff.h1') // the emptiest host
  for (const m of [...made, onH1]) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  for (const m of ['h1', 'h2', 'h3']) assert.deepEqual(await onHost(hosts[m]), [])
})

// docs/multihost.md#callers-see-only-the-default-sandbox-functions and #tls:
// on the callers' listener a caller reaches the router's sandbox::* and
// nothing else; a host admitted there by its credential
// (--engine-token-file) serves only in the namespace the auth function
// grants it; a wrong credential is refused, and the host says why.
test('the callers\' listener: credentials admit, only sandbox::* is reachable', async () => {
  // Telemetry off: the SDK's process-wide OTel exporter would be re-aimed at
  // this listener, which it cannot authenticate to, and retry for ever.
  const caller = connectCaller(rbacUrl, 'rbac-caller', {
    headers: { authorization: 'Bearer caller-credential' },
    otel: { enabled: false }
  })
  try {
    const c = await caller.call('sandbox::catalog::list', {}, 10000)
    assert.ok(c.images.length > 0, JSON.stringify(c))
    const refused = await caller.call('skiff::host::status', {}, 10000).then(() => null, e => String(e?.message ?? e))
    assert.ok(refused, 'skiff::host::status answered a caller')
    assert.doesNotMatch(refused, /boot_id/)
  } finally {
    await caller.iii.shutdown()
  }

  const token = join(tmp, 'hq.token')
  writeFileSync(token, 'host-hq-credential\n', { mode: 0o600 })
  const wrong = join(tmp, 'wrong.token')
  writeFileSync(wrong, 'not-a-credential\n', { mode: 0o600 })
  const serve = (name, ns, file) => {
    const cfg = join(tmp, `${name}.yaml`)
    writeFileSync(cfg, 'image_allowlist: [host]\nisolation: jail\nmax_concurrent_sandboxes: 2\n')
    return start(name, [SKIFF, 'serve', '--port', '0', '--config', cfg, '--engine', rbacUrl, '--engine-ca', CA,
      '--engine-token-file', file, '--iii-namespace', ns], { XDG_DATA_HOME: join(tmp, `data-${name}`) })
  }
  const outsider = serve('outsider', 'skiff.outsider', wrong)
  const hq = serve('hq', 'skiff.hq', token)
  try {
    await waitFor('hq to join through the callers\' listener', async () => (await healthyHosts()).has('skiff.hq'))
    await waitFor('the outsider to be refused', () => /AUTH_ERROR/.test(outsider.log()), 20000)
    assert.match(outsider.log(), /engine_token_file/)
    assert.ok(!(await healthyHosts()).has('skiff.outsider'))
  } finally {
    for (const p of [hq, outsider]) {
      p.kill('SIGTERM')
      await p.exited
    }
    await waitFor('hq to be gone', async () => !(await healthyHosts()).has('skiff.hq'))
  }
})

test('two hosts given one namespace: the second is refused and exits 3 saying why', async () => {
  const port = await freePort()
  const cfg = join(tmp, 'dup.yaml')
  writeFileSync(cfg, 'image_allowlist: [host]\nisolation: jail\n')
  const dup = start('dup', [SKIFF, 'serve', '--port', String(port), '--config', cfg, '--engine', engineUrl,
    '--engine-ca', CA, '--iii-namespace', 'skiff.h2'], { XDG_DATA_HOME: join(tmp, 'data-dup') })
  assert.equal(await dup.exited, 3)
  assert.match(dup.log(), /WORKER_NAMESPACE_CONFLICT/)
  assert.match(dup.log(), /skiff\.h2/)
  assert.match(dup.log(), /--iii-namespace/)
  assert.equal((await healthyHosts()).size, 3) // the first one is untouched
})

// docs/multihost.md#routing: the router records where each sandbox lives in
// the engine's state, so a router that placed none of them (a standby
// taking over, a restart) finds them there — including the one whose host
// died before it came: "host lost", not "not found".
test('a standby router takes over when the active one goes, and finds sandboxes through the engine\'s state', async () => {
  const placed = []
  for (let i = 0; i < 3; i++) placed.push(await call('sandbox::create', { image: 'host' }))
  const victim = placed[0]
  const kept = placed.filter(m => m.host !== victim.host)
  assert.ok(kept.length > 0, JSON.stringify(placed))
  const standby = startRouter('standby')
  await waitFor('the standby to stand by', () => /standing by/.test(standby.log()), 20000)
  const victimName = victim.host.replace(/^skiff\./, '')
  hosts[victimName].child.kill('SIGKILL')
  await hosts[victimName].child.exited
  hosts.router.kill('SIGTERM')
  assert.equal(await hosts.router.exited, 0)
  hosts.router = standby
  await waitFor('the standby to serve', async () => (await healthyHosts()).size === 2, 30000)
  for (const m of kept) {
    const x = await call('sandbox::exec', { sandbox_id: m.sandbox_id, cmd: 'echo routed' })
    assert.equal(x.stdout, 'routed\n')
  }
  const lost = await sError(call('sandbox::exec', { sandbox_id: victim.sandbox_id, cmd: 'true' }))
  assert.equal(lost.code, 'S301', JSON.stringify(lost))
  assert.match(lost.message, new RegExp(`host lost: .*${victim.host.replace('.', '\\.')}`))
  hosts[victimName] = await startHost(victimName)
  await waitFor('the host back', async () => (await healthyHosts()).size === 3)
  for (const m of kept) await call('sandbox::stop', { sandbox_id: m.sandbox_id, wait: true })
  for (const m of ['h1', 'h2', 'h3']) assert.deepEqual(await onHost(hosts[m]), [])
})

test('a router refuses an engine that cannot keep namespaces apart (0.22)', async () => {
  const old = start('engine-0.22', [DOUBLE, '--port', '0', '--legacy-0.22'])
  const port = await waitFor('the 0.22 double', () => /listening (\d+)/.exec(old.log())?.[1])
  const r = start('router-0.22', [SKIFF, 'route', '--engine', `ws://127.0.0.1:${port}`, '--probe-ms', '200'])
  assert.equal(await r.exited, 3)
  assert.match(r.log(), /0\.23/)
  old.kill('SIGTERM')
  await old.exited
})
