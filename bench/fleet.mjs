// Fleet benchmark driver, called by bench/fleet.py (the fleet rows of
// bench/run), which starts the engine, the hosts and the router and owns
// them. One caller, the unmodified iii-sdk from tests/e2e/node, joined to the
// engine; each mode prints one JSON line starting with {"mode".
//
//   node bench/fleet.mjs latency   <engine port> <runs> <execs> <host ns> <host http port>
//   node bench/fleet.mjs creates   <engine port> <callers> <seconds> <hosts>
//   node bench/fleet.mjs kill      <engine port> <hosts> <victim ns> <victim pid> s301|placement <poll ms>
//   node bench/fleet.mjs partition <engine port> <hosts> <victim ns> <victim pid> <poll ms>
//
// latency: sandbox::run, sandbox::exec and sandbox::fs::read of 1 MiB with
// all its bytes, routed (default namespace → router → host) against the
// same function in the host's namespace, and against the host's own HTTP
// API, interleaved call by call with rotating order. iii-sdk 0.22's trigger() has no namespace field (TriggerRequest is
// function_id, payload, action, timeoutMs, metadata), so the direct call
// goes over the SDK's own connection as the invokefunction message the
// router itself sends, with `namespace` set; its answer is matched by the
// SDK's own invocation table.
//
// creates: <callers> concurrent create + stop loops through the router for
// <seconds>; an S400 (no room anywhere) is counted and retried after 20 ms.
//
// kill: SIGKILL of the victim host. `s301`: calls to a sandbox placed
// there, one at a time, until one is answered S301 (host lost); the time is
// when that answer arrived. `placement`: polls for the host's exclusion (below).
//
// partition: SIGSTOP of the victim (it stays connected but answers
// nothing), polls for its exclusion, checks that creates avoid it, SIGCONT,
// and times until it is placed on again.
//
// Polling for an exclusion: every <poll ms>, without waiting for earlier
// polls, a sandbox::exec naming an unknown id. The router asks each host it
// counts healthy whether it has the id (skiff::host::has): while the victim
// is counted, the poll fails S300 (the killed host's function is gone, the
// stopped one times out at the probe deadline); once it is dropped, the poll
// is answered S002 without asking it. The time is when the first poll
// answered S002 was sent: the host was dropped before that poll reached the
// router and after the last S300 poll sent before it, so the poll spacing is
// the resolution, whatever a poll itself takes. Lists are not used to poll:
// the router would hold each one on a stopped host for its 30 s list
// deadline.
import { createRequire } from 'node:module'
import { randomUUID } from 'node:crypto'

const [mode, port, ...rest] = process.argv.slice(2)
const req = createRequire(new URL('../tests/e2e/node/package.json', import.meta.url))
const sdk = await import(req.resolve('iii-sdk'))
const registerWorker = sdk.registerWorker ?? sdk.default.registerWorker
const channel = await import(req.resolve('iii-sdk/channel'))
const ChannelReader = channel.ChannelReader ?? channel.default.ChannelReader
const READ_BYTES = 1 << 20  // the file fs::read reads in the latency mode

const iii = registerWorker(`ws://127.0.0.1:${port}`, {
  workerName: 'skiff-fleet-bench', enableMetricsReporting: false, invocationTimeoutMs: 300000
})
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const now = () => Number(process.hrtime.bigint()) / 1e6
const routed = (function_id, payload, timeoutMs = 300000) => iii.trigger({ function_id, payload, timeoutMs })

// The function in one namespace, over the SDK's connection (see above).
function inNamespace (ns, function_id, payload, timeoutMs = 300000) {
  const invocation_id = randomUUID()
  return new Promise((resolve, reject) => {
    const timeout = setTimeout(() => {
      iii.invocations.delete(invocation_id)
      reject(new Error(`${ns}/${function_id}: no answer in ${timeoutMs} ms`))
    }, timeoutMs)
    iii.invocations.set(invocation_id, {
      resolve: r => { clearTimeout(timeout); resolve(r) },
      reject: e => { clearTimeout(timeout); reject(e) },
      function_id,
      timeout
    })
    iii.sendMessage('invokefunction', { invocation_id, function_id, data: payload, namespace: ns })
  })
}

async function overHttp (hostPort, function_id, payload) {
  const r = await fetch(`http://127.0.0.1:${hostPort}/v1/functions/${function_id}`, {
    method: 'POST', body: JSON.stringify(payload), headers: { 'content-type': 'application/json' }
  })
  const body = await r.json()
  if (r.status !== 200) throw new Error(`${function_id}: HTTP ${r.status} ${JSON.stringify(body)}`)
  return body
}

// The S-code of a failed call ('' when the error carries none).
function sCode (e) {
  const text = String(e?.message ?? e)
  const at = text.indexOf('{', text.indexOf('handler error: '))
  if (at < 0) return ''
  try { return JSON.parse(text.slice(at)).code ?? '' } catch { return '' }
}
async function outcome (p) {
  try { return { ok: await p } } catch (e) { return { code: sCode(e), text: String(e?.message ?? e) } }
}

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]
}
const summary = v => ({ n: v.length, p50_ms: pct(v, 0.5), p99_ms: pct(v, 0.99) })

// The hosts the router places on: every healthy host answers the catalog.
async function healthy () {
  const c = await routed('sandbox::catalog::list', {}, 5000)
  return new Set(c.images.map(i => i.host))
}
async function waitHealthy (n, ms = 60000) {
  const end = now() + ms
  while (now() < end) {
    try { if ((await healthy()).size === n) return } catch {}
    await sleep(50)
  }
  throw new Error(`the router did not see ${n} healthy hosts in ${ms} ms`)
}
const stop = id => routed('sandbox::stop', { sandbox_id: id, wait: true }, 60000)

async function latency (runs, execs, ns, hostPort) {
  await waitHealthy(1)
  const ways = {
    routed: (f, p) => routed(f, p),
    direct: (f, p) => inNamespace(ns, f, p),
    http: (f, p) => overHttp(hostPort, f, p)
  }
  const names = Object.keys(ways)
  async function compare (fid, payload, check, n, by = ways) {
    const t = Object.fromEntries(names.map(k => [k, []]))
    const one = async k => {
      const t0 = now()
      const r = await by[k](fid, payload)
      const ms = now() - t0
      if (!check(r)) throw new Error(`${k} ${fid}: unexpected answer ${JSON.stringify(r)}`)
      return ms
    }
    for (let i = 0; i < 3; ++i) for (const k of names) await one(k)  // warm-up
    for (let i = 0; i < n; ++i) {
      for (let j = 0; j < names.length; ++j) {  // rotate which way goes first
        const k = names[(i + j) % names.length]
        t[k].push(await one(k))
      }
    }
    const r = Object.fromEntries(names.map(k => [k, summary(t[k])]))
    // Median of the per-round differences: each round's calls saw the same load.
    r.paired_added_p50_ms = pct(t.routed.map((x, i) => x - t.direct[i]), 0.5)
    return r
  }
  const out = { mode: 'latency', host: ns }
  out['sandbox::run'] = await compare('sandbox::run',
    { image: 'host', lang: 'sh', code: 'true', isolation: 'jail' }, r => r.exit_code === 0, runs)
  const box = await routed('sandbox::create', { image: 'host', isolation: 'jail' })
  if (box.host !== ns) throw new Error(`created on ${box.host}, not ${ns}`)
  try {
    out['sandbox::exec'] = await compare('sandbox::exec',
      { sandbox_id: box.sandbox_id, cmd: 'true' }, r => r.exit_code === 0, execs)
    // fs::read of a file and all its bytes: through the engine, its content
    // is a channel on the engine (read with the SDK's ChannelReader); over
    // the host's HTTP API, the streamed download.
    const made = await routed('sandbox::exec',
      { sandbox_id: box.sandbox_id, argv: ['sh', '-c', `head -c ${READ_BYTES} /dev/urandom > /tmp/read.bin`] })
    if (made.exit_code !== 0) throw new Error(`writing the file to read: ${JSON.stringify(made)}`)
    const readAll = async r => new ChannelReader(`ws://127.0.0.1:${port}`, r.content).readAll()
    const file = `http://127.0.0.1:${hostPort}/v1/sandboxes/${box.sandbox_id}/files?path=/tmp/read.bin`
    out['sandbox::fs::read'] = await compare('sandbox::fs::read',
      { sandbox_id: box.sandbox_id, path: '/tmp/read.bin' }, b => b.length === READ_BYTES, runs, {
        routed: async (f, p) => readAll(await routed(f, p)),
        direct: async (f, p) => readAll(await inNamespace(ns, f, p)),
        http: async () => {
          const r = await fetch(file)
          if (r.status !== 200) throw new Error(`download: HTTP ${r.status} ${await r.text()}`)
          return Buffer.from(await r.arrayBuffer())
        }
      })
  } finally {
    await stop(box.sandbox_id)
  }
  return out
}

async function creates (callers, seconds, hosts) {
  await waitHealthy(hosts)
  let refused = 0
  const lat = []
  const per = {}
  const errors = []
  async function loop (end) {
    let cycles = 0
    while (now() < end) {
      const t0 = now()
      const r = await outcome(routed('sandbox::create', { image: 'host', isolation: 'jail' }, 120000))
      if (r.code === 'S400') { ++refused; await sleep(20); continue }
      if (!r.ok) { errors.push(r.text.slice(0, 300)); if (errors.length > 20) break; continue }
      lat.push(now() - t0)
      per[r.ok.host] = (per[r.ok.host] ?? 0) + 1
      await stop(r.ok.sandbox_id)
      ++cycles
    }
    return cycles
  }
  await Promise.all(Array.from({ length: callers }, () => loop(now() + 1)))  // warm-up, not counted
  refused = 0; lat.length = 0; errors.length = 0
  for (const k of Object.keys(per)) delete per[k]
  const t0 = now()
  const counts = await Promise.all(Array.from({ length: callers }, () => loop(t0 + seconds * 1000)))
  const elapsed = (now() - t0) / 1000
  const cycles = counts.reduce((a, b) => a + b, 0)
  return {
    mode: 'creates', callers, hosts, seconds: elapsed, cycles, per_sec: cycles / elapsed,
    refused, errors, per_host: per, create: summary(lat)
  }
}

// Creates through the router until one lands on the victim; the others are stopped.
async function sandboxOn (victim, tries = 6) {
  const other = []
  try {
    for (let i = 0; i < tries; ++i) {
      const m = await routed('sandbox::create', { image: 'host', isolation: 'jail' })
      if (m.host === victim) return m.sandbox_id
      other.push(m.sandbox_id)
    }
    throw new Error(`no create landed on ${victim} in ${tries} tries`)
  } finally {
    for (const id of other) await stop(id)
  }
}

// Polls as described above until the router has dropped the victim; resolves
// to { ms, polls, codes } once every poll sent has its answer.
async function untilDropped (t0, pollMs) {
  const polls = []
  let first = null
  while (first === null && now() - t0 < 30000) {
    const sent = now() - t0
    polls.push(outcome(routed('sandbox::exec', { sandbox_id: randomUUID(), cmd: 'true' }, 10000))
      .then(r => {
        const code = r.ok ? 'ok' : r.code || 'other'
        if (code === 'S002' && (first === null || sent < first)) first = sent
        return code
      }))
    await sleep(pollMs)
  }
  const codes = {}
  for (const c of await Promise.all(polls)) codes[c] = (codes[c] ?? 0) + 1
  if (first === null) throw new Error(`the router kept the host for 30 s: ${JSON.stringify(codes)}`)
  return { ms: first, polls: polls.length, codes }
}

async function kill (hosts, victim, pid, what, pollMs) {
  await waitHealthy(hosts)
  const id = await sandboxOn(victim)
  const t0 = now()
  process.kill(pid, 'SIGKILL')
  if (what === 'placement') return { mode: 'kill', what, ...(await untilDropped(t0, pollMs)) }
  const codes = {}
  for (let polls = 1; now() - t0 < 30000; ++polls) {
    const r = await outcome(routed('sandbox::exec', { sandbox_id: id, cmd: 'true' }, 5000))
    const code = r.ok ? 'ok' : r.code || 'other'
    codes[code] = (codes[code] ?? 0) + 1
    if (code === 'S301') return { mode: 'kill', what, ms: now() - t0, polls, codes }
    await sleep(pollMs)
  }
  throw new Error(`kill: no S301 within 30 s: ${JSON.stringify(codes)}`)
}

async function partition (hosts, victim, pid, pollMs) {
  await waitHealthy(hosts)
  let stopped = true
  const t0 = now()
  process.kill(pid, 'SIGSTOP')
  try {
    const dropped = await untilDropped(t0, pollMs)
    // Placement now avoids it.
    const made = []
    for (let i = 0; i < hosts; ++i) made.push(await routed('sandbox::create', { image: 'host', isolation: 'jail' }))
    const onVictim = made.filter(m => m.host === victim).length
    for (const m of made) await stop(m.sandbox_id)
    // Back: the first catalog poll (every <poll ms>) whose answer has the host again.
    const t1 = now()
    process.kill(pid, 'SIGCONT')
    stopped = false
    const polls = []
    let back = null
    while (back === null && now() - t1 < 30000) {
      const sent = now() - t1
      polls.push(healthy().then(h => { if (h.has(victim) && (back === null || sent < back)) back = sent }, () => {}))
      await sleep(pollMs)
    }
    await Promise.all(polls)
    return { mode: 'partition', ...dropped, creates_on_victim: onVictim, creates: made.length, back_ms: back }
  } finally {
    if (stopped) process.kill(pid, 'SIGCONT')
  }
}

let out
try {
  if (mode === 'latency') out = await latency(Number(rest[0]), Number(rest[1]), rest[2], rest[3])
  else if (mode === 'creates') out = await creates(Number(rest[0]), Number(rest[1]), Number(rest[2]))
  else if (mode === 'kill') out = await kill(Number(rest[0]), rest[1], Number(rest[2]), rest[3], Number(rest[4]))
  else if (mode === 'partition') out = await partition(Number(rest[0]), rest[1], Number(rest[2]), Number(rest[3]))
  else throw new Error(`unknown mode ${mode}`)
} catch (e) {
  process.exitCode = 1
  console.error(`bench/fleet.mjs ${mode}: ${e?.message ?? e}`)  // the last line, read by bench/fleet.py
} finally {
  await iii.shutdown()
}
if (out) console.log(JSON.stringify(out))
