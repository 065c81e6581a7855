// tools/server/sdk_checks.mjs — shared pieces of the SDK client scripts that tests/server runs against
// `helium serve`: loading the official SDKs from build/npm-tools, named checks that fail loudly, and a
// runner that prints "ok <name>" per check and exits non-zero on the first mismatch.
import { createRequire } from "node:module";
import path from "node:path";

// The SDK packages live in build/npm-tools (scripts/install-deps), not beside this file.
export function loadSdk(npmTools, name) {
  const require = createRequire(path.join(path.resolve(npmTools), "package.json"));
  const mod = require(name);
  return mod.default ?? mod;
}

export class CheckFailure extends Error {}

export function check(condition, message, detail) {
  if (!condition) {
    const extra = detail === undefined ? "" : `\n  got: ${JSON.stringify(detail, null, 1)?.slice(0, 2000)}`;
    throw new CheckFailure(message + extra);
  }
}

export function checkEqual(actual, expected, message) {
  check(JSON.stringify(actual) === JSON.stringify(expected), `${message}: expected ${JSON.stringify(expected)}`, actual);
}

// Runs the named checks in order; stops at the first failure with exit code 1.
export async function runChecks(checks) {
  const only = process.env.HELIUM_SDK_CHECK;  // run one check by name, when debugging
  for (const [name, fn] of checks) {
    if (only && only !== name) continue;
    try {
      await fn();
      console.log(`ok ${name}`);
    } catch (e) {
      console.log(`FAILED ${name}: ${e instanceof CheckFailure ? e.message : e?.stack ?? e}`);
      if (e?.status) console.log(`  status ${e.status}: ${JSON.stringify(e.error ?? e.body ?? "")}`);
      process.exit(1);
    }
  }
  console.log("all checks passed");
}

// Collects an SDK stream's events.
export async function collect(stream) {
  const events = [];
  for await (const event of stream) events.push(event);
  return events;
}
