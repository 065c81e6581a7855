// bench/server/prompt_cache.mjs — issue 5's prompt-cache figure: a first chat turn of about 4K prompt
// tokens, then a second turn that extends it (the first answer plus a new question), each streamed
// through POST /v1/chat/completions. Prints time to first token (first content delta) of both turns and
// the second turn's cached share of its prompt (usage.prompt_tokens_details.cached_tokens), as JSON.
//
//   node bench/server/prompt_cache.mjs --binary build/release/src/cli/helium [--ctx 8192] [--words 2600]
//        [--device cpu] [--json out.json]
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) =>
  (a.startsWith("--") ? acc.concat([[a.slice(2), all[i + 1]]]) : acc), []));
const binary = args.binary ?? "build/release/src/cli/helium";
const ctx = args.ctx ?? "8192";
const words = Number(args.words ?? 2600);
const device = args.device ?? "cpu";

function startServer() {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ["serve", "--port", "0", "-c", ctx, "--device", device], { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    const onData = (d) => {
      log += d.toString();
      const m = log.match(/http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve({ child, port: Number(m[1]) });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => reject(new Error(`helium serve exited ${code}:\n${log}`)));
  });
}

// A long, varied user message: code-like lines so the tokenizer sees ordinary text.
function longMessage(n) {
  const vocab = ["def", "return", "value", "index", "parse", "buffer", "result", "count", "items", "total",
                 "config", "path", "token", "stream", "cache", "layer", "shape", "error", "status", "batch"];
  const lines = [];
  for (let i = 0, w = 0; w < n; ++i) {
    const line = [];
    for (let j = 0; j < 10 && w < n; ++j, ++w) line.push(vocab[(i * 7 + j * 13) % vocab.length] + (i % 17));
    lines.push(line.join(" "));
  }
  return "Summarise what this code does:\n" + lines.join("\n");
}

async function turn(port, messages) {
  const t0 = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages, max_tokens: 32, temperature: 0, stream: true,
                           stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null, text = "", usage = null, buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("");
      if (!data || data === "[DONE]") continue;
      const json = JSON.parse(data);
      const delta = json.choices?.[0]?.delta?.content;
      if (delta && ttft === null) ttft = performance.now() - t0;
      if (delta) text += delta;
      if (json.usage) usage = json.usage;
    }
  }
  return { ttft_ms: ttft, total_ms: performance.now() - t0, text, usage };
}

const { child, port } = await startServer();
try {
  const first = [{ role: "user", content: longMessage(words) }];
  const t1 = await turn(port, first);
  const second = first.concat([{ role: "assistant", content: t1.text }, { role: "user", content: "And its failure modes?" }]);
  const t2 = await turn(port, second);
  const cached = t2.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const result = {
    device, context: Number(ctx),
    first_turn: { prompt_tokens: t1.usage?.prompt_tokens, ttft_ms: t1.ttft_ms },
    second_turn: { prompt_tokens: t2.usage?.prompt_tokens, cached_tokens: cached, ttft_ms: t2.ttft_ms },
    cached_share: cached / t2.usage?.prompt_tokens,
    ttft_ratio: t2.ttft_ms / t1.ttft_ms,
    targets: { cached_share_at_least: 0.9, ttft_ratio_at_most: 0.2 },
  };
  console.log(JSON.stringify(result, null, 2));
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 2));
} finally {
  child.kill("SIGTERM");
}
