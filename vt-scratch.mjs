import Database from "libsql";
import { rmSync } from "node:fs";
const N = Number(process.argv[2] ?? 10000), D = 512, opts = process.argv[3] ?? "metric=cosine";
rmSync("/tmp/vt-search.db", { force: true }); rmSync("/tmp/vt-search.db-wal", { force: true });
const db = new Database("/tmp/vt-search.db");
db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL");
db.exec(`CREATE TABLE v (id INTEGER PRIMARY KEY, k TEXT UNIQUE, e F32_BLOB(${D}))`);
db.exec(`CREATE INDEX v_idx ON v (libsql_vector_idx(e, ${opts.split(',').map(o=>"'"+o+"'").join(', ')}))`);
let seed = 1; const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const vec = () => { const v = new Float32Array(D); for (let n = 0; n < 100; n++) v[Math.floor(rnd()*D)] = rnd()*2-1; return v; };
const hex = (v) => Buffer.from(v.buffer).toString("hex");
const ins = db.prepare("INSERT INTO v (k, e) VALUES (?, vector32(unhex(?)))");
let t = performance.now(); let maxIns = 0;
const B = 100;
for (let i = 0; i < N; i += B) {
  const t0 = performance.now();
  db.exec("BEGIN"); for (let j = i; j < i + B; j++) ins.run("k"+j, hex(vec())); db.exec("COMMIT");
  maxIns = Math.max(maxIns, performance.now() - t0);
}
console.log(`insert ${N}: ${((performance.now()-t)/N).toFixed(3)} ms/row, worst batch of ${B} ${maxIns.toFixed(1)} ms`);
const q = db.prepare("SELECT v.k, vector_distance_cos(v.e, vector32(unhex(?))) d FROM vector_top_k('v_idx', vector32(unhex(?)), 10) t JOIN v ON v.rowid = t.id");
const exact = db.prepare("SELECT k, vector_distance_cos(e, vector32(unhex(?))) d FROM v ORDER BY d LIMIT 10");
let recall = 0; t = performance.now(); const Q = 50; let te = 0;
for (let i = 0; i < Q; i++) { const h = hex(vec()); const a = q.all(h, h); const t1 = performance.now(); const b = exact.all(h); te += performance.now()-t1; const s = new Set(b.map(r=>r.k)); recall += a.filter(r=>s.has(r.k)).length/10; }
console.log(`ann+exact loop; exact ${(te/Q).toFixed(2)} ms/q, ann ${((performance.now()-t-te)/Q).toFixed(2)} ms/q, recall@10 ${(recall/Q).toFixed(3)}`);
