// PTY keystroke echo through the WebSocket attach route, called by bench/run:
// a `cat` on a pseudo-terminal in one sandbox of a running skiffd; each
// round sends one keystroke as a binary message and times its echo (the
// terminal's line discipline echoes it inside the sandbox). Prints one JSON
// object with p50/p99.
//
// Usage: node bench/pty_echo.mjs <port> <runs> <image> <isolation>
// `ws` comes from tests/e2e/node (a dependency of iii-sdk; npm ci there).
import { createRequire } from 'node:module'

const [port, runsArg, image, isolation] = process.argv.slice(2)
const runs = Number(runsArg)
const req = createRequire(new URL('../tests/e2e/node/package.json', import.meta.url))
const WebSocket = (await import(req.resolve('ws'))).default

async function call (fid, payload) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/functions/${fid}`, {
    method: 'POST', body: JSON.stringify(payload), headers: { 'content-type': 'application/json' }
  })
  const body = await r.json()
  if (r.status !== 200) throw new Error(`${fid}: HTTP ${r.status} ${JSON.stringify(body)}`)
  return body
}

const { sandbox_id } = await call('sandbox::create', { image, isolation })
try {
  const { pid } = await call('sandbox::process::start', { sandbox_id, argv: ['cat'], pty: { rows: 24, cols: 80 } })
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/sandboxes/${sandbox_id}/processes/${pid}/tty`)
  ws.binaryType = 'nodebuffer'
  let waiting = null
  let started
  const ready = new Promise(resolve => { started = resolve })
  ws.on('message', (data, isBinary) => {
    if (!isBinary) {
      if (JSON.parse(data.toString()).type === 'start') started()
      return
    }
    if (waiting && data.includes(waiting.key)) {
      const w = waiting
      waiting = null
      w.resolve(performance.now() - w.t0)
    }
  })
  await new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject) })
  await ready
  const times = []
  const keys = 'abcdefghijklmnopqrstuvwxyz'
  for (let i = 0; i < runs + 5; i++) {
    const key = keys[i % keys.length]
    const ms = await new Promise(resolve => {
      waiting = { key: Buffer.from(key), t0: performance.now(), resolve }
      ws.send(Buffer.from(key))
    })
    if (i >= 5) times.push(ms)  // the first few warm the path
    if (i % 20 === 19) ws.send(Buffer.from('\r'))  // keep the line short
  }
  ws.close()
  const s = [...times].sort((a, b) => a - b)
  const pct = p => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]
  console.log(JSON.stringify({ isolation, runs: times.length, p50_ms: pct(0.5), p99_ms: pct(0.99) }))
} finally {
  await call('sandbox::stop', { sandbox_id, wait: true })
}
