// tools/server/openai_sdk.mjs — drives `helium serve` with the official `openai` SDK the way OpenCode,
// pi and Codex use it, and checks the shapes: models, chat completions (plain, streamed with usage,
// tool-result round trip, pi's message quirks), completions, and responses (plain and streamed, with
// function / namespace / custom / hosted tools in the request). Greedy requests are sent both streamed
// and not, and their texts must match. Used by tests/server/sdk_clients_test.cpp.
//
//   node tools/server/openai_sdk.mjs <npm-tools-dir> <base-url> <model-id>
//
// Prints "ok <check>" per check; exits 1 at the first mismatch.
import { check, checkEqual, collect, loadSdk, runChecks } from "./sdk_checks.mjs";

const [npmTools, baseUrl, model] = process.argv.slice(2);
if (!model) {
  console.error("usage: node openai_sdk.mjs <npm-tools-dir> <base-url> <model-id>");
  process.exit(2);
}
const OpenAI = loadSdk(npmTools, "openai");
const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "local", maxRetries: 0, timeout: 120_000 });

const chatRequest = {
  model,
  messages: [
    { role: "system", content: "You write Python." },
    { role: "user", content: "def fibonacci(n):" },
  ],
  max_tokens: 12,
  temperature: 0,
  seed: 7,
};
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const responsesTools = [
  { type: "function", name: "shell", description: "Run a command", parameters: { type: "object", properties: { command: { type: "array", items: { type: "string" } } } }, strict: false },
  { type: "namespace", name: "mcp__files__", description: "File tools", tools: [{ type: "function", name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }] },
  { type: "custom", name: "apply_patch", description: "Apply a patch", format: { type: "grammar", syntax: "lark", definition: "start: /.+/" } },
  { type: "web_search" },
  { type: "image_generation" },
];

let plainChat;
let plainResponseText;

async function expectStatus(promise, status, fragment) {
  try {
    await promise;
  } catch (e) {
    check(e.status === status, `expected HTTP ${status}`, { status: e.status, error: e.error });
    const message = e.error?.message ?? e.message ?? "";
    check(message.includes(fragment), `error message should mention ${fragment}`, message);
    return;
  }
  check(false, `expected HTTP ${status}, the request succeeded`);
}

await runChecks([
  ["models.list", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    check(ids.includes(model), `models.list should list ${model}`, ids);
    const raw = await (await fetch(`${baseUrl}/v1/models`)).json();
    check(raw.object === "list" && raw.data[0].object === "model", "OpenAI list shape", raw);
    check(raw.models?.[0]?.slug === model && Number.isInteger(raw.models[0].context_window), "Codex catalog entry in `models`", raw.models);
  }],

  ["chat.completions", async () => {
    const r = await client.chat.completions.create(chatRequest);
    check(r.object === "chat.completion" && r.id.startsWith("chatcmpl-"), "object and id", r);
    check(r.choices.length === 1 && r.choices[0].message.role === "assistant", "one assistant choice", r.choices);
    check(typeof r.choices[0].message.content === "string", "content is a string", r.choices[0].message);
    check(["stop", "length"].includes(r.choices[0].finish_reason), "finish_reason", r.choices[0]);
    const u = r.usage;
    check(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.completion_tokens <= 12, "usage counts", u);
    check(u.total_tokens === u.prompt_tokens + u.completion_tokens, "total_tokens", u);
    check(Number.isInteger(u.prompt_tokens_details?.cached_tokens), "prompt_tokens_details.cached_tokens", u);
    plainChat = r;
  }],

  ["chat.completions stream + include_usage", async () => {
    const chunks = await collect(await client.chat.completions.create({ ...chatRequest, stream: true, stream_options: { include_usage: true } }));
    check(chunks.length >= 3, "several chunks", chunks.length);
    check(chunks[0].choices[0].delta.role === "assistant", "first delta carries the role", chunks[0]);
    check(chunks.every((c) => c.object === "chat.completion.chunk" && c.id === chunks[0].id), "one id, chunk objects");
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    check(finishing.length === 1, "exactly one finish_reason", finishing);
    const last = chunks[chunks.length - 1];
    check(last.choices.length === 0 && last.usage, "a last chunk with usage and no choices", last);
    check(chunks[chunks.length - 2] === finishing[0], "usage comes after the finish chunk");
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    checkEqual(text, plainChat.choices[0].message.content, "streamed text equals the non-streamed text (greedy)");
    checkEqual(last.usage.completion_tokens, plainChat.usage.completion_tokens, "same completion_tokens");
    // The same prompt again: everything but its last token comes from the prompt cache.
    check(last.usage.prompt_tokens_details.cached_tokens >= last.usage.prompt_tokens - 1, "prompt cache reuse reported", last.usage);
  }],

  ["chat.completions.stream helper", async () => {
    const stream = client.chat.completions.stream({ ...chatRequest });
    const final = await stream.finalChatCompletion();
    checkEqual(final.choices[0].message.content, plainChat.choices[0].message.content, "helper's final text");
  }],

  ["chat tool-result round trip", async () => {
    const r = await client.chat.completions.create({
      model, max_tokens: 8, temperature: 0, tools: [weatherTool], tool_choice: "auto",
      messages: [
        { role: "user", content: "What is the weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "sunny, 21 C" },
      ],
    });
    check(r.choices[0].message.role === "assistant", "an answer after the tool result", r);
  }],

  ["chat pi/opencode message quirks", async () => {
    // Assistant content as text parts with replayed reasoning_content, developer role, tools: [],
    // max_completion_tokens, store: false, unknown fields: all accepted.
    const r = await client.chat.completions.create({
      model, max_completion_tokens: 4, store: false, tools: [], temperature: 0.7, top_p: 0.9,
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "hi" }] },
        { role: "assistant", content: [{ type: "text", text: "hello" }], reasoning_content: "greet back",
          tool_calls: [{ id: "call_9", type: "function", function: { name: "read", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "call_9", content: "file text" },
      ],
      some_unknown_field: { nested: true },
    });
    check(r.usage.completion_tokens <= 4, "max_completion_tokens honoured", r.usage);
  }],

  ["chat tool_choice none + response_format", async () => {
    const r = await client.chat.completions.create({ ...chatRequest, tools: [weatherTool], tool_choice: "none", response_format: { type: "json_object" } });
    check(r.choices[0].message.tool_calls === undefined, "no tool calls with tool_choice none", r.choices[0].message);
    await expectStatus(client.chat.completions.create({ ...chatRequest, response_format: { type: "json_schema", json_schema: { name: "x" } } }), 400, "response_format.json_schema.schema");
  }],

  ["chat errors", async () => {
    await expectStatus(client.chat.completions.create({ ...chatRequest, max_tokens: 0 }), 400, "max_tokens");
    await expectStatus(client.chat.completions.create({ ...chatRequest, max_tokens: 100000 }), 400, "context");
    await expectStatus(client.chat.completions.create({ model, max_tokens: 4 }), 400, "messages");
    await expectStatus(client.chat.completions.create({ ...chatRequest, temperature: "hot" }), 400, "temperature");
  }],

  ["completions", async () => {
    const request = { model, prompt: "def add(a, b):", max_tokens: 8, temperature: 0 };
    const r = await client.completions.create(request);
    check(r.object === "text_completion" && r.id.startsWith("cmpl-"), "object and id", r);
    check(typeof r.choices[0].text === "string" && ["stop", "length"].includes(r.choices[0].finish_reason), "choice", r.choices);
    const chunks = await collect(await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } }));
    const text = chunks.map((c) => c.choices[0]?.text ?? "").join("");
    checkEqual(text, r.choices[0].text, "streamed completion equals the non-streamed one");
    check(chunks[chunks.length - 1].usage?.completion_tokens === r.usage.completion_tokens, "usage chunk", chunks[chunks.length - 1]);
    const ids = await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 2 });
    check(ids.usage.prompt_tokens === 4, "token-id prompt", ids.usage);
  }],

  ["responses", async () => {
    const r = await client.responses.create({
      model, instructions: "You are terse.", max_output_tokens: 8, temperature: 0, tools: responsesTools, tool_choice: "auto",
      input: [{ role: "user", content: [{ type: "input_text", text: "List the files." }] }],
    });
    check(r.object === "response" && r.id.startsWith("resp_"), "object and id", r);
    check(["completed", "incomplete"].includes(r.status), "status", r.status);
    check(r.output.length >= 1 && r.output[0].type === "message" && r.output[0].content[0].type === "output_text", "a message item", r.output);
    check(typeof r.output_text === "string", "output_text", r);
    const u = r.usage;
    check(u.input_tokens > 0 && u.output_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens, "usage", u);
    check(Number.isInteger(u.input_tokens_details.cached_tokens), "input_tokens_details.cached_tokens", u);
    plainResponseText = r.output_text;
  }],

  ["responses with Codex-style history", async () => {
    const r = await client.responses.create({
      model, max_output_tokens: 4, tools: responsesTools, store: false, parallel_tool_calls: false,
      reasoning: { effort: "medium", summary: "auto" }, include: ["reasoning.encrypted_content"], prompt_cache_key: "abc",
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions>...</permissions>" }] },
        { type: "message", role: "user", content: [{ type: "input_text", text: "read a.txt" }] },
        { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "opaque" },
        { type: "function_call", call_id: "call_a", name: "read_file", namespace: "mcp__files__", arguments: '{"path":"a.txt"}' },
        { type: "function_call_output", call_id: "call_a", output: [{ type: "input_text", text: "hello" }] },
        { type: "custom_tool_call", call_id: "call_b", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" },
        { type: "custom_tool_call_output", call_id: "call_b", output: "Done" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Done." }] },
        { type: "message", role: "user", content: [{ type: "input_text", text: "thanks" }] },
      ],
    });
    check(r.status === "completed" || r.status === "incomplete", "answered", r);
  }],

  ["responses stream (raw events)", async () => {
    const events = await collect(await client.responses.create({
      model, instructions: "You are terse.", max_output_tokens: 8, temperature: 0, tools: responsesTools, stream: true,
      input: [{ role: "user", content: [{ type: "input_text", text: "List the files." }] }],
    }));
    events.forEach((e, i) => check(e.sequence_number === i, "sequence numbers count from 0", e));
    const types = events.map((e) => e.type).filter((t) => t !== "keepalive");  // sent while the engine is busy
    checkEqual(types.slice(0, 2), ["response.created", "response.in_progress"], "stream start");
    checkEqual(types[types.length - 1], "response.completed", "stream end");
    const added = events.find((e) => e.type === "response.output_item.added");
    check(added?.item?.type === "message", "a message item is added", added);
    const itemId = added.item.id;
    const order = types.filter((t) => !t.startsWith("response.output_text.delta"));
    checkEqual(order, ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"], "event order");
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    check(deltas.every((d) => d.item_id === itemId && d.output_index === 0 && d.content_index === 0), "delta addressing", deltas[0]);
    const text = deltas.map((d) => d.delta).join("");
    checkEqual(text, events.find((e) => e.type === "response.output_text.done").text, "done text is the deltas joined");
    checkEqual(text, plainResponseText, "streamed text equals the non-streamed one (greedy)");
    const completed = events[events.length - 1].response;
    checkEqual(completed.id, events[0].response.id, "one response id");
    checkEqual(completed.output[0].id, itemId, "completed output repeats the streamed item id");
    const u = completed.usage;
    check(Number.isInteger(u.input_tokens) && Number.isInteger(u.output_tokens) && u.total_tokens === u.input_tokens + u.output_tokens, "usage", u);
    check(Number.isInteger(u.input_tokens_details?.cached_tokens), "cached tokens", u);
  }],

  ["responses.stream helper", async () => {
    const stream = client.responses.stream({
      model, instructions: "You are terse.", max_output_tokens: 8, temperature: 0, tools: responsesTools,
      input: [{ role: "user", content: [{ type: "input_text", text: "List the files." }] }],
    });
    const final = await stream.finalResponse();
    checkEqual(final.output_text, plainResponseText, "helper's final text");
  }],

  ["responses errors", async () => {
    await expectStatus(client.responses.create({ model, input: "hi", previous_response_id: "resp_x" }), 400, "previous_response_id");
    await expectStatus(client.responses.create({ model, input: 42 }), 400, "input");
    // Too long for the context while streaming: the failure comes in the stream, as Codex expects.
    let events;
    try {
      events = await collect(await client.responses.create({ model, input: "hi", max_output_tokens: 100000, stream: true }));
    } catch (e) {
      events = [e];
    }
    const failed = events.find((e) => e.type === "response.failed") ?? events[0];
    check(failed?.response?.error?.code === "context_length_exceeded" || failed?.error?.code === "context_length_exceeded" ||
          String(failed?.message ?? "").includes("context"), "context_length_exceeded in the stream", failed);
  }],
]);
