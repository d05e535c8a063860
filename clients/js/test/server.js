// Starts a real `artifactd serve` for the tests, on a temporary data
// directory and a free loopback port. The binary is $ARTIFACTD_BIN, or is
// built with `go build ./cmd/artifactd` from the repository. Without CI
// set, a missing Go toolchain skips the tests; with CI set it fails them.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

let built;

/** Returns the artifactd binary, or a skip reason (string) outside CI. */
export function binary() {
  if (process.env.ARTIFACTD_BIN) return { bin: process.env.ARTIFACTD_BIN };
  if (built) return { bin: built };
  const dir = mkdtempSync(join(tmpdir(), "artifactd-js-"));
  const out = join(dir, "artifactd");
  const r = spawnSync("go", ["build", "-o", out, "./cmd/artifactd"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  if (r.error || r.status !== 0) {
    const msg = `artifactd tests need the artifactd binary: set ARTIFACTD_BIN or install Go (${r.error?.message ?? "go build exit " + r.status})`;
    if (process.env.CI) throw new Error(msg);
    return { skip: msg };
  }
  built = out;
  return { bin: out };
}

/** Starts `artifactd serve`; resolves to { url, data, stop(), replayVerify(ctx, hash) }. */
export async function startServer(...flags) {
  const { bin, skip } = binary();
  if (skip) return { skip };
  const data = mkdtempSync(join(tmpdir(), "artifactd-data-"));
  const proc = spawn(bin, ["serve", "--data", data, "--addr", "127.0.0.1:0", ...flags], { stdio: ["ignore", "pipe", "ignore"] });
  const url = await new Promise((resolveUrl, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error("artifactd serve did not start within 60 s")), 60000);
    proc.stdout.on("data", (chunk) => {
      buf += chunk;
      const m = /serving (http:\/\/\S+)/.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
    proc.on("exit", (code) => reject(new Error(`artifactd serve exited with ${code}`)));
  });
  proc.stdout.resume();
  let stopped;
  const stop = () =>
    (stopped ??= new Promise((r) => {
      if (proc.exitCode !== null) return r();
      proc.once("exit", () => r());
      proc.kill("SIGINT");
    }));
  return {
    url,
    data,
    bin,
    stop,
    replayVerify(ctx, hash) {
      return spawnSync(bin, ["replay", "--data", data, "--context", ctx, "--verify", hash], { stdio: "ignore" }).status;
    },
    async close() {
      await stop();
      rmSync(data, { recursive: true, force: true });
    },
  };
}
