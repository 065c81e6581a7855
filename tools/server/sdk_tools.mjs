// tools/server/sdk_tools.mjs — tool calls, reasoning and stop sequences through the official SDKs,
// against a `helium serve` whose engine is scripted (tests/server/sdk_clients_test.cpp): the server uses
// the Qwen3 tokenizer and chat template, and answers each request with the output named by the last
// "SCRIPT:<name>" in the prompt, streamed token by token through the real output parser and stream
// writers. Checks OpenAI delta.tool_calls / reasoning_content, Responses function_call (plain and
// namespaced), custom_tool_call and reasoning items, and Anthropic thinking / tool_use blocks.
//
//   node tools/server/sdk_tools.mjs <npm-tools-dir> <base-url> <model-id>
//
// Prints "ok <check>" per check; exits 1 at the first mismatch.
import { check, checkEqual, collect, loadSdk, runChecks } from "./sdk_checks.mjs";

const [npmTools, baseUrl, model] = process.argv.slice(2);
if (!model) {
  console.error("usage: node sdk_tools.mjs <npm-tools-dir> <base-url> <model-id>");
  process.exit(2);
}
const OpenAI = loadSdk(npmTools, "openai");
const Anthropic = loadSdk(npmTools, "@anthropic-ai/sdk");
const openai = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: "local", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: baseUrl, apiKey: "local", maxRetries: 0 });

const weatherSchema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const chatTools = [
  { type: "function", function: { name: "get_weather", description: "Current weather", parameters: weatherSchema } },
];
const responsesTools = [
  { type: "function", name: "get_weather", description: "Current weather", parameters: weatherSchema, strict: false },
  { type: "namespace", name: "mcp__files__", description: "File tools", tools: [
    { type: "function", name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } },
  ] },
  { type: "custom", name: "apply_patch", description: "Apply a patch", format: { type: "grammar", syntax: "lark", definition: "start: /.+/" } },
  { type: "web_search" },
];
const anthropicTools = [
  { name: "get_weather", description: "Current weather", input_schema: weatherSchema },
  { name: "list_files", description: "List files", input_schema: { type: "object", properties: {} } },
];
const user = (script) => [{ role: "user", content: `Please help. SCRIPT:${script}` }];

await runChecks([
  ["chat stream: reasoning_content and delta.tool_calls", async () => {
    const chunks = await collect(await openai.chat.completions.create({
      model, messages: user("weather"), tools: chatTools, stream: true, stream_options: { include_usage: true }, max_tokens: 200,
    }));
    const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
    const reasoning = deltas.map((d) => d.reasoning_content ?? "").join("");
    checkEqual(reasoning, "The user wants the weather.", "reasoning_content");
    check(!deltas.some((d) => (d.content ?? "").includes("<")), "no markup leaks into content", deltas);
    const toolDeltas = deltas.flatMap((d) => d.tool_calls ?? []);
    const first = toolDeltas[0];
    check(first.index === 0 && first.id.startsWith("call_") && first.type === "function" && first.function.name === "get_weather",
          "first tool delta carries index, id, type and name", first);
    check(toolDeltas.slice(1).every((d) => d.id === undefined && d.function.name === undefined), "id and name only once", toolDeltas);
    const args = toolDeltas.map((d) => d.function.arguments ?? "").join("");
    checkEqual(JSON.parse(args), { city: "Paris" }, "arguments");
    const finish = chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason;
    checkEqual(finish, "tool_calls", "finish_reason");
    check(chunks[chunks.length - 1].usage?.completion_tokens > 0, "usage chunk", chunks[chunks.length - 1]);
    const final = await openai.chat.completions.stream({ model, messages: user("weather"), tools: chatTools }).finalChatCompletion();
    checkEqual(final.choices[0].message.tool_calls[0].function.name, "get_weather", "stream helper's tool call");
  }],

  ["chat: two tool calls, not streamed", async () => {
    const r = await openai.chat.completions.create({ model, messages: user("two_calls"), tools: chatTools });
    const m = r.choices[0].message;
    checkEqual(r.choices[0].finish_reason, "tool_calls", "finish_reason");
    check(m.content === null && m.tool_calls.length === 2, "two calls, no content", m);
    check(m.tool_calls[0].id !== m.tool_calls[1].id, "distinct ids", m.tool_calls);
    checkEqual(m.tool_calls.map((c) => JSON.parse(c.function.arguments).city), ["Paris", "Rome"], "arguments in order");
  }],

  ["chat: a call to a tool the request does not offer stays text", async () => {
    const r = await openai.chat.completions.create({ model, messages: user("weather") });
    check(r.choices[0].message.tool_calls === undefined && r.choices[0].message.content.includes("get_weather"),
          "the call comes back as text", r.choices[0].message);
    checkEqual(r.choices[0].finish_reason, "stop", "finish_reason");
  }],

  ["chat: stop sequence", async () => {
    const r = await openai.chat.completions.create({ model, messages: user("stop"), stop: ["STOP"] });
    checkEqual(r.choices[0].message.content, "one two\n", "text ends before the stop string");
    checkEqual(r.choices[0].finish_reason, "stop", "finish_reason");
  }],

  ["responses stream: reasoning item then function_call", async () => {
    const events = await collect(await openai.responses.create({ model, input: user("weather"), tools: responsesTools, stream: true }));
    events.forEach((e, i) => check(e.sequence_number === i, "sequence numbers", e));
    const added = events.filter((e) => e.type === "response.output_item.added").map((e) => e.item);
    checkEqual(added.map((i) => i.type), ["reasoning", "function_call"], "items");
    const reasoning = events.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta).join("");
    checkEqual(reasoning, "The user wants the weather.", "reasoning text");
    const call = events.find((e) => e.type === "response.output_item.done" && e.item.type === "function_call").item;
    check(call.call_id.startsWith("call_") && call.id === added[1].id && call.name === "get_weather" && call.status === "completed", "call item", call);
    checkEqual(JSON.parse(call.arguments), { city: "Paris" }, "arguments");
    const argDeltas = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e.delta).join("");
    checkEqual(argDeltas, call.arguments, "argument deltas add up");
    const completed = events[events.length - 1];
    checkEqual(completed.type, "response.completed", "last event");
    checkEqual(completed.response.output.map((i) => i.id), added.map((i) => i.id), "completed output repeats the streamed ids");
    const final = await openai.responses.stream({ model, input: user("weather"), tools: responsesTools }).finalResponse();
    checkEqual(final.output.map((i) => i.type), ["reasoning", "function_call"], "stream helper's final output");
  }],

  ["responses: namespaced tool comes back with its namespace", async () => {
    const r = await openai.responses.create({ model, input: user("namespaced"), tools: responsesTools });
    const call = r.output.find((i) => i.type === "function_call");
    check(call && call.name === "read_file" && call.namespace === "mcp__files__", "name and namespace split back", r.output);
    checkEqual(JSON.parse(call.arguments), { path: "a.txt" }, "arguments");
  }],

  ["responses stream: custom tool call", async () => {
    const events = await collect(await openai.responses.create({ model, input: user("custom"), tools: responsesTools, stream: true }));
    const done = events.find((e) => e.type === "response.output_item.done" && e.item.type === "custom_tool_call");
    check(done && done.item.name === "apply_patch" && done.item.input === "*** Begin Patch\n*** End Patch", "custom_tool_call item", events.map((e) => e.type));
    const input = events.find((e) => e.type === "response.custom_tool_call_input.done");
    checkEqual(input?.input, done.item.input, "custom_tool_call_input.done");
  }],

  ["messages stream: thinking then tool_use", async () => {
    const stream = anthropic.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 200, tools: anthropicTools, messages: user("weather"),
                                               thinking: { type: "enabled", budget_tokens: 1024 } });
    const events = [];
    stream.on("streamEvent", (e) => events.push(structuredClone(e)));
    const final = await stream.finalMessage();
    checkEqual(final.content.map((b) => b.type), ["thinking", "tool_use"], "blocks");
    checkEqual(final.content[0].thinking, "The user wants the weather.", "thinking text");
    check(final.content[0].signature.length > 0, "a signature", final.content[0]);
    const types = events.filter((e) => e.type === "content_block_delta").map((e) => e.delta.type);
    check(types.indexOf("signature_delta") > types.lastIndexOf("thinking_delta"), "signature_delta after the thinking deltas", types);
    check(types.includes("input_json_delta"), "input_json_delta", types);
    check(final.content[1].id.startsWith("toolu_") && final.content[1].name === "get_weather", "tool_use block", final.content[1]);
    checkEqual(final.content[1].input, { city: "Paris" }, "tool input");
    checkEqual(final.stop_reason, "tool_use", "stop_reason");
  }],

  ["messages stream: tool_use with empty input still gets an input_json_delta", async () => {
    const stream = anthropic.messages.stream({ model, max_tokens: 200, tools: anthropicTools, messages: user("empty_args") });
    const events = [];
    stream.on("streamEvent", (e) => events.push(structuredClone(e)));
    const final = await stream.finalMessage();
    const block = final.content.find((b) => b.type === "tool_use");
    checkEqual(block?.input, {}, "empty input");
    check(events.some((e) => e.type === "content_block_delta" && e.delta.type === "input_json_delta"), "an input_json_delta was sent", events);
  }],

  ["messages: stop_sequences", async () => {
    const r = await anthropic.messages.create({ model, max_tokens: 100, messages: user("stop"), stop_sequences: ["STOP"] });
    checkEqual(r.stop_reason, "stop_sequence", "stop_reason");
    checkEqual(r.stop_sequence, "STOP", "stop_sequence");
    checkEqual(r.content[0].text, "one two\n", "text ends before the stop sequence");
  }],

  ["messages: thinking and text, not streamed", async () => {
    const r = await anthropic.messages.create({ model, max_tokens: 100, messages: user("think_text") });
    checkEqual(r.content.map((b) => b.type), ["thinking", "text"], "blocks");
    checkEqual(r.content[1].text, "The answer is 4.", "text");
    checkEqual(r.stop_reason, "end_turn", "stop_reason");
  }],

  ["max_tokens cuts a scripted answer", async () => {
    const r = await anthropic.messages.create({ model, max_tokens: 2, messages: user("think_text") });
    checkEqual(r.stop_reason, "max_tokens", "stop_reason");
    checkEqual(r.usage.output_tokens, 2, "output_tokens");
  }],
]);
