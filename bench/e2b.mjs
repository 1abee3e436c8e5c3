// The E2B rows of bench/run, through the unmodified e2b SDK against a
// skiffd (E2B_API_URL / E2B_SANDBOX_URL set by bench/e2b.py):
// Sandbox.create + commands.run('echo hi') + kill, and a 100 MiB
// files.write + files.read beside the same bytes written and read locally.
// Usage: node bench/e2b.mjs <runs> <template>; prints one JSON line.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import { randomBytes } from 'node:crypto'
import { writeFileSync, readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// The SDK installed for the tests (tests/e2e/node), pinned there.
const req = createRequire(new URL('../tests/e2e/node/package.json', import.meta.url))
const { Sandbox } = await import(pathToFileURL(req.resolve('e2b')).href)

const runs = Number(process.argv[2] ?? 30)
const template = process.argv[3] ?? 'base'
const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))] }
const ms = t0 => Number(process.hrtime.bigint() - t0) / 1e6

const cycle = []
for (let i = 0; i < runs + 3; i++) {
  const t0 = process.hrtime.bigint()
  const sbx = await Sandbox.create(template)
  const r = await sbx.commands.run('echo hi')
  await sbx.kill()
  if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
  if (i >= 3) cycle.push(ms(t0))  // three warm-up rounds (pool fill, caches)
}

const data = randomBytes(100 << 20)
const sbx = await Sandbox.create(template)
const files = []
const local = []
const dir = mkdtempSync(join(tmpdir(), 'skiff-e2b-bench-'))
for (let i = 0; i < 3; i++) {
  let t0 = process.hrtime.bigint()
  await sbx.files.write('/tmp/bench.bin', data)
  const back = await sbx.files.read('/tmp/bench.bin', { format: 'bytes' })
  files.push(ms(t0))
  if (back.length !== data.length) throw new Error('short read')
  t0 = process.hrtime.bigint()
  writeFileSync(join(dir, 'bench.bin'), data)
  readFileSync(join(dir, 'bench.bin'))
  local.push(ms(t0))
}
await sbx.kill()
rmSync(dir, { recursive: true, force: true })
console.log(JSON.stringify({
  runs, template,
  cycle_p50_ms: pct(cycle, 0.5), cycle_p99_ms: pct(cycle, 0.99),
  files_100mib_ms: pct(files, 0.5), local_100mib_ms: pct(local, 0.5)
}))
