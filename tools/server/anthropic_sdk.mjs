// tools/server/anthropic_sdk.mjs — drives `helium serve` with the official `@anthropic-ai/sdk` the way
// Claude Code uses it, and checks the shapes: models.list (Anthropic list shape), messages (plain and
// streamed, with Claude Code's attribution block in the system prompt), the tool_result round trip with
// thinking and tool_use history, count_tokens, `?beta=true`, HEAD /, and errors. Used by
// tests/server/sdk_clients_test.cpp.
//
//   node tools/server/anthropic_sdk.mjs <npm-tools-dir> <base-url> <model-id>
//
// Prints "ok <check>" per check; exits 1 at the first mismatch.
import { check, checkEqual, loadSdk, runChecks } from "./sdk_checks.mjs";

const [npmTools, baseUrl, model] = process.argv.slice(2);
if (!model) {
  console.error("usage: node anthropic_sdk.mjs <npm-tools-dir> <base-url> <model-id>");
  process.exit(2);
}
const Anthropic = loadSdk(npmTools, "@anthropic-ai/sdk");
const client = new Anthropic({ baseURL: baseUrl, apiKey: "local", maxRetries: 0, timeout: 120_000 });

// Claude Code's first system block changes on every request (cch=...); the server drops it, so two
// requests that differ only there share their whole prompt in the cache.
const system = (cch) => [
  { type: "text", text: `x-anthropic-billing-header: cc_version=2.1.0; cc_entrypoint=cli; cch=${cch};` },
  { type: "text", text: "You write Python.", cache_control: { type: "ephemeral" } },
];
const request = {
  model: "claude-haiku-4-5-20251001",
  max_tokens: 10,
  temperature: 0,
  system: system("first"),
  messages: [{ role: "user", content: "def fibonacci(n):" }],
  metadata: { user_id: "user_abc" },
};
const weatherTool = {
  name: "get_weather",
  description: "Current weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

let plain;

async function expectError(promise, status, type, fragment) {
  try {
    await promise;
  } catch (e) {
    check(e.status === status, `expected HTTP ${status}`, { status: e.status, error: e.error });
    check(e.error?.type === "error" && e.error?.error?.type === type, `Anthropic error shape with type ${type}`, e.error);
    check(e.error.error.message.includes(fragment), `error message should mention ${fragment}`, e.error.error.message);
    return;
  }
  check(false, `expected HTTP ${status}, the request succeeded`);
}

await runChecks([
  ["HEAD /", async () => {
    const r = await fetch(`${baseUrl}/`, { method: "HEAD" });
    check(r.status === 200, "HEAD / answers 200", r.status);
  }],

  ["models.list", async () => {
    const models = [];
    for await (const m of client.models.list({ limit: 1000 })) models.push(m);
    check(models.some((m) => m.id === model && m.type === "model" && typeof m.display_name === "string" && m.created_at),
          "Anthropic model entries", models);
  }],

  ["messages", async () => {
    const r = await client.messages.create(request);
    check(r.type === "message" && r.role === "assistant" && r.id.startsWith("msg_"), "message object", r);
    check(r.content.length === 1 && r.content[0].type === "text" && typeof r.content[0].text === "string", "one text block", r.content);
    check(["end_turn", "max_tokens"].includes(r.stop_reason), "stop_reason", r.stop_reason);
    const u = r.usage;
    for (const key of ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"])
      check(Number.isInteger(u[key]), `usage.${key}`, u);
    check(u.output_tokens > 0 && u.output_tokens <= 10, "output_tokens within max_tokens", u);
    plain = r;
  }],

  ["attribution block does not defeat the prompt cache", async () => {
    const r = await client.messages.create({ ...request, system: system("second") });
    const prompt = r.usage.input_tokens + r.usage.cache_read_input_tokens;
    checkEqual(prompt, plain.usage.input_tokens + plain.usage.cache_read_input_tokens, "same prompt size");
    check(r.usage.cache_read_input_tokens >= prompt - 1, "all but the last prompt token from the cache", r.usage);
    checkEqual(r.content[0].text, plain.content[0].text, "same greedy answer");
  }],

  ["count_tokens", async () => {
    const { model: _m, max_tokens: _t, metadata: _d, temperature: _x, ...body } = request;
    const r = await client.messages.countTokens({ ...body, model: request.model });
    checkEqual(r.input_tokens, plain.usage.input_tokens + plain.usage.cache_read_input_tokens + plain.usage.cache_creation_input_tokens,
               "count_tokens equals the prompt the messages call used");
  }],

  ["messages.stream", async () => {
    const stream = client.messages.stream(request);
    const events = [];
    stream.on("streamEvent", (e) => events.push(structuredClone(e)));  // the SDK grows message_start's message in place
    const final = await stream.finalMessage();
    const types = events.map((e) => e.type);
    checkEqual(types[0], "message_start", "first event");
    checkEqual(types.slice(-2), ["message_delta", "message_stop"], "last events");
    const blocks = types.filter((t) => t.startsWith("content_block_"));
    checkEqual(blocks[0], "content_block_start", "a block starts");
    checkEqual(blocks[blocks.length - 1], "content_block_stop", "and stops");
    check(events[0].message.usage && events[0].message.content.length === 0, "message_start carries usage and no content", events[0]);
    const delta = events.find((e) => e.type === "message_delta");
    check(Number.isInteger(delta.usage.output_tokens) && Number.isInteger(delta.usage.cache_read_input_tokens), "message_delta usage", delta);
    checkEqual(final.content[0].text, plain.content[0].text, "streamed text equals the non-streamed text (greedy)");
    checkEqual(final.stop_reason, plain.stop_reason, "same stop_reason");
    checkEqual(final.usage.output_tokens, plain.usage.output_tokens, "same output_tokens");
  }],

  ["tool_result round trip with thinking history", async () => {
    const r = await client.messages.create({
      ...request,
      tools: [weatherTool],
      tool_choice: { type: "auto" },
      thinking: { type: "enabled", budget_tokens: 1024 },
      messages: [
        { role: "user", content: "What is the weather in Paris?" },
        { role: "assistant", content: [
          { type: "thinking", thinking: "I should call the tool.", signature: "sig" },
          { type: "text", text: "Checking." },
          { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
        ] },
        { role: "user", content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "sunny, 21 C" }], is_error: false, cache_control: { type: "ephemeral" } },
          { type: "text", text: "Thanks." },
        ] },
      ],
    });
    check(r.type === "message" && r.content.length >= 1, "an answer after the tool result", r);
  }],

  ["beta messages (?beta=true)", async () => {
    const r = await client.beta.messages.create({ ...request, betas: ["interleaved-thinking-2025-05-14"] });
    checkEqual(r.content[0].text, plain.content[0].text, "same answer through /v1/messages?beta=true");
  }],

  ["errors", async () => {
    const { max_tokens: _t, ...noMax } = request;
    await expectError(client.messages.create(noMax), 400, "invalid_request_error", "max_tokens");
    await expectError(client.messages.create({ ...request, messages: "hi" }), 400, "invalid_request_error", "messages");
    await expectError(client.messages.create({ ...request, messages: [{ role: "robot", content: "hi" }] }), 400, "invalid_request_error", "messages[0].role");
    await expectError(client.messages.create({ ...request, max_tokens: 1000000 }), 400, "invalid_request_error", "context");
  }],
]);
