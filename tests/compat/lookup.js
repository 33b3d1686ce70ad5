// Test infrastructure for tests/integration/compat.rs: Node.js's dns.lookup (the C library's getaddrinfo,
// through libuv) and dns.resolveSrv (c-ares, reading resolv.conf). For each case one line: the
// milliseconds it took, a tab, the answer space-separated, or `error` and the message.
//   host:NAME  dns.lookup(NAME, {all: true})
//   srv:NAME   dns.resolveSrv(NAME), as "port:target"
const dns = require('dns');

async function run(c) {
  const i = c.indexOf(':');
  const kind = c.slice(0, i), name = c.slice(i + 1);
  if (kind === 'host') {
    const all = await dns.promises.lookup(name, { all: true });
    return all.map((a) => a.address);
  }
  if (kind === 'srv') {
    const all = await dns.promises.resolveSrv(name);
    return all.map((s) => `${s.port}:${s.name.toLowerCase().replace(/\.$/, '')}`);
  }
  throw new Error(`unsupported case ${c}`);
}

(async () => {
  for (const c of process.argv.slice(2)) {
    const start = process.hrtime.bigint();
    let line;
    try {
      const out = await run(c);
      line = out.join(' ');
    } catch (e) {
      line = `error\t${e.code || ''} ${e.message}`.replace(/\n/g, ' ');
    }
    const took = Number(process.hrtime.bigint() - start) / 1e6;
    console.log(`${took.toFixed(3)}\t${line}`);
  }
})();
