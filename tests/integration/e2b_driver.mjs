// Drives hearth's envd endpoint with E2B's own SDK (the `e2b` npm package
// that scripts/deps.sh --test installs into build/node), the way its users
// do, and prints what each call gave as one JSON object for
// test_envd.py to judge.
//
//   node e2b_driver.mjs URL SCENARIO [ENVD_VERSION] [TOKEN]
//
// With ENVD_VERSION the sandbox object is made as the SDK makes it for a
// sandbox that reports that envd version (0.2.0: what CubeSandbox
// reports, so every call names the user "user" and uploads go as
// multipart); without it, as Sandbox.create({debug: true}) does.
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const sdkPath =
  process.env.E2B_SDK ||
  path.join(here, '..', '..', 'build', 'node', 'node_modules', 'e2b', 'dist', 'index.mjs')
const { Sandbox, CommandExitError } = await import(sdkPath)

const [url, scenario, version, token] = process.argv.slice(2)
const out = {}

async function sandbox() {
  if (!version && !token) return Sandbox.create({ debug: true, sandboxUrl: url })
  // The constructor is what Sandbox.create/connect end in once E2B's API
  // has said which envd version and token the sandbox has.
  return new Sandbox({
    sandboxId: 'hearth',
    sandboxUrl: url,
    debug: true,
    envdVersion: version || '99.99.99',
    envdAccessToken: token,
  })
}

async function caught(fn) {
  try {
    return { value: await fn() }
  } catch (e) {
    return { error: e.name, message: String(e.message), exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }
  }
}

const sbx = await sandbox()

const scenarios = {
  async commands() {
    const r = await sbx.commands.run('echo hello; echo oops >&2')
    out.run = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }
    out.exit = await caught(() => sbx.commands.run('echo partial; exit 3'))
    out.env = (await sbx.commands.run('echo "$GREETING"', { envs: { GREETING: 'hi there' } })).stdout
    out.cwd = (await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout
    out.user = (await sbx.commands.run('id -un', { user: 'nobody', cwd: '/' })).stdout
    out.id = (await sbx.commands.run('id -u')).stdout
    const t0 = Date.now()
    out.timeout = await caught(() => sbx.commands.run('sleep 30', { timeoutMs: 1000 }))
    out.timeout_ms = Date.now() - t0
    const chunks = []
    await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => chunks.push(d) })
    out.streamed = chunks.join('')
    out.badcmd = await caught(() => sbx.commands.run('/no/such/program'))
  },

  async background() {
    const h = await sbx.commands.run('read line; echo "got:$line"; sleep 30', {
      background: true,
      stdin: true,
    })
    out.pid = h.pid
    out.listed = (await sbx.commands.list()).map((p) => ({ pid: p.pid, cmd: p.cmd, args: p.args }))
    await sbx.commands.sendStdin(h.pid, 'ping\n')
    // A second client follows the same process.
    const seen = []
    const h2 = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) })
    const deadline = Date.now() + 5000
    while (!h.stdout.includes('got:ping') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    out.stdout = h.stdout
    out.killed = await sbx.commands.kill(h.pid)
    out.wait = await caught(() => h.wait())
    out.wait2 = await caught(() => h2.wait())
    out.after = (await sbx.commands.list()).map((p) => p.pid)
    out.kill_gone = await sbx.commands.kill(h.pid)
    const h3 = await sbx.commands.run('cat', { background: true, stdin: true })
    await sbx.commands.sendStdin(h3.pid, 'echoed\n')
    await sbx.commands.closeStdin(h3.pid)
    out.cat = (await h3.wait()).stdout
  },

  async files() {
    const w = await sbx.files.write('/tmp/e2b/a/b.txt', 'hello file')
    out.write = w
    out.read = await sbx.files.read('/tmp/e2b/a/b.txt')
    const bin = new Uint8Array(300000)
    for (let i = 0; i < bin.length; i++) bin[i] = (i * 7 + 3) & 255
    await sbx.files.write('/tmp/e2b/bin', bin.buffer)
    const back = await sbx.files.read('/tmp/e2b/bin', { format: 'bytes' })
    out.bin_len = back.length
    out.bin_same = back.length === bin.length && back.every((v, i) => v === bin[i])
    await sbx.files.write('/tmp/e2b/octet', 'via octet-stream', { useOctetStream: true })
    out.octet = await sbx.files.read('/tmp/e2b/octet')
    out.multi = await sbx.files.write([
      { path: '/tmp/e2b/m1', data: 'one' },
      { path: '/tmp/e2b/m2', data: 'two' },
    ])
    out.m2 = await sbx.files.read('/tmp/e2b/m2')
    out.empty = await sbx.files.read((await sbx.files.write('/tmp/e2b/empty', '')).path)
    out.exists = [await sbx.files.exists('/tmp/e2b/m1'), await sbx.files.exists('/tmp/e2b/nope')]
    const info = await sbx.files.getInfo('/tmp/e2b/a/b.txt')
    out.info = { name: info.name, type: info.type, path: info.path, size: info.size, permissions: info.permissions, owner: info.owner, mtime: info.modifiedTime instanceof Date }
    out.mkdir = [await sbx.files.makeDir('/tmp/e2b/d/e'), await sbx.files.makeDir('/tmp/e2b/d/e')]
    out.list1 = (await sbx.files.list('/tmp/e2b')).map((e) => `${e.type}:${e.path}`).sort()
    out.list2 = (await sbx.files.list('/tmp/e2b', { depth: 2 })).map((e) => e.path).sort()
    const mv = await sbx.files.rename('/tmp/e2b/m1', '/tmp/e2b/moved/m1')
    out.rename = { name: mv.name, path: mv.path }
    out.moved = await sbx.files.read('/tmp/e2b/moved/m1')
    await sbx.files.remove('/tmp/e2b/d')
    out.removed = await sbx.files.exists('/tmp/e2b/d')
    out.missing = await caught(() => sbx.files.read('/tmp/e2b/missing'))
    out.readdir = await caught(() => sbx.files.read('/tmp/e2b'))
    out.listfile = await caught(() => sbx.files.list('/tmp/e2b/m2'))
    out.statmissing = await caught(() => sbx.files.getInfo('/tmp/e2b/missing'))
  },

  async watch() {
    // The SDK's files.watchDir: a directory, then (recursive) its tree;
    // the changes are made by commands, which run through hearth too.
    await sbx.files.makeDir('/tmp/w/sub')
    await sbx.files.write('/tmp/w/plain', 'x')
    const until = async (list, want) => {
      const deadline = Date.now() + 10000
      while (!list.includes(want) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    }
    const flat = []
    let exited = 'running'
    const h = await sbx.files.watchDir('/tmp/w', (e) => flat.push(`${e.type}:${e.name}`), {
      onExit: (err) => (exited = err ? `error:${err.message}` : 'ended'),
    })
    await sbx.commands.run(
      'cd /tmp/w && echo a > f && echo b >> f && chmod 600 f && mv f g && echo deep > sub/deep && rm g',
    )
    await until(flat, 'remove:g')
    out.flat = flat.slice()
    await h.stop()
    out.flat_exited = exited
    const tree = []
    const h2 = await sbx.files.watchDir('/tmp/w', (e) => tree.push(`${e.type}:${e.name}`), { recursive: true })
    await sbx.commands.run('echo again > /tmp/w/sub/deep2 && mkdir /tmp/w/new')
    await until(tree, 'create:new')
    // The new directory is watched once its create event came.
    await new Promise((r) => setTimeout(r, 300))
    await sbx.commands.run('echo inner > /tmp/w/new/inner')
    await until(tree, 'create:new/inner')
    out.tree = tree.slice()
    await h2.stop()
    out.missing = await caught(() => sbx.files.watchDir('/tmp/nowhere', () => {}))
    out.notdir = await caught(() => sbx.files.watchDir('/tmp/w/plain', () => {}))
    // includeEntry: create, write and chmod carry the entry (as hearth's
    // files.stat saw it just after), remove none.
    const withEntry = []
    const h3 = await sbx.files.watchDir(
      '/tmp/w',
      (e) =>
        withEntry.push({
          ev: `${e.type}:${e.name}`,
          entry: e.entry ? { name: e.entry.name, type: e.entry.type, path: e.entry.path, size: e.entry.size } : null,
        }),
      { includeEntry: true },
    )
    await sbx.commands.run('printf 12345 > /tmp/w/e')
    const seen = () => withEntry.map((x) => x.ev)
    let deadline = Date.now() + 10000
    while (!seen().includes('write:e') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    await sbx.commands.run('rm /tmp/w/e')
    deadline = Date.now() + 10000
    while (!seen().includes('remove:e') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    out.entry = withEntry
    await h3.stop()
    // Connect-Timeout-Ms (the SDK's timeoutMs) ends the stream.
    let ended = null
    await sbx.files.watchDir('/tmp/w', () => {}, {
      timeoutMs: 1000,
      onExit: (err) => (ended = err ? err.name : 'ended'),
    })
    const t0 = Date.now()
    while (ended === null && Date.now() - t0 < 10000) await new Promise((r) => setTimeout(r, 50))
    out.timeout_exit = ended
  },

  async pty() {
    let data = ''
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (data += new TextDecoder().decode(d)) })
    await sbx.pty.resize(h.pid, { cols: 100, rows: 30 })
    await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit 7\n'))
    out.wait = await caught(() => h.wait())
    out.data = data
  },

  async cube() {
    // As the SDK behaves against CubeSandbox's envd 0.2.0: the user
    // "user" on every call, multipart uploads.
    out.whoami = (await sbx.commands.run('id -un')).stdout
    out.write = await sbx.files.write('cube.txt', 'in the home')
    out.read = await sbx.files.read('cube.txt')
    out.info = (await sbx.files.getInfo('cube.txt')).owner
  },

  async token() {
    out.run = await caught(() => sbx.commands.run('echo ok'))
    out.read = await caught(() => sbx.files.write('/tmp/t', 'x'))
    out.get = await caught(() => sbx.files.read('/tmp/t'))
  },
}

await scenarios[scenario]()
console.log(JSON.stringify(out))
process.exit(0)
