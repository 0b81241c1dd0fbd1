// edge.expected.txt is what cool-workflow v0.2.6 itself prints for edge.state.json:
// with its dist/ (commit 726be9d4) copied to ../core (dist/core/{hash.js,state/node-projection.js,state/node-snapshot.js}), run `node edge.gen.js edge.state.json > edge.expected.txt`.
// For each node: the snapshot, its replay (now 2025-03-02T00:00:00.000Z), the diff from the previous node's snapshot.
const fs = require("fs");
const ns = require("../core/state/node-snapshot.js");
const run = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
let out = "";
const now = "2025-03-02T00:00:00.000Z";
let prev = null;
for (const n of run.nodes) {
  const snap = ns.snapshotNode(run, n.id, { persist: false });
  out += JSON.stringify(snap, null, 2) + "\n";
  const rp = ns.replayNodeSnapshot(run, JSON.parse(JSON.stringify(snap)), { now, persist: false, pathExists: () => true });
  out += JSON.stringify(rp, null, 2) + "\n";
  if (prev) out += JSON.stringify(ns.diffNodeSnapshots(prev, snap), null, 2) + "\n";
  prev = snap;
}
process.stdout.write(out);
