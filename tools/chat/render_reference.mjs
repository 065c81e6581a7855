// tools/chat/render_reference.mjs — renders every (template, conversation) pair of the chat-template
// fixtures with @huggingface/jinja, the independent implementation helium's chat templates are compared
// with (tests/chat/chat_template_reference_test.cpp). Owns nothing but this comparison; it must not
// post-process the reference's output.
//
// Usage: node render_reference.mjs <npm-tools-dir> <templates.json> <conversations.json> [out.json]
// templates.json:     [{name, file (relative to its folder), bos_token, eos_token}]
// conversations.json: {now, tools: {name: tool}, conversations: [{name, messages, tools?: [names],
//                     add_generation_prompt?, extra?}]}
// Writes {"results": [{template, conversation, output} or {template, conversation, error}]} to out.json
// (or stdout). The render inputs are built exactly as helium's ChatTemplateInputs are: messages, tools
// (null when the conversation has none, as transformers passes them), add_generation_prompt (default
// true), bos_token, eos_token, then the extra keys. extra.strftime_now (or the file's "now") pins the
// clock that the template's strftime_now() reads.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

const [npmTools, templatesPath, conversationsPath, outPath] = process.argv.slice(2);
if (!npmTools || !templatesPath || !conversationsPath) {
  console.error("usage: node render_reference.mjs <npm-tools-dir> <templates.json> <conversations.json> [out.json]");
  process.exit(2);
}
const jinjaEntry = join(npmTools, "node_modules", "@huggingface", "jinja", "dist", "index.js");
const { Template } = await import(pathToFileURL(jinjaEntry).href);

const templates = JSON.parse(readFileSync(templatesPath, "utf8"));
const fixture = JSON.parse(readFileSync(conversationsPath, "utf8"));

// strftime_now() in @huggingface/jinja formats `new Date()` with local-time getters. Building the pinned
// date from local components makes those getters return exactly the pinned fields, whatever TZ is.
const RealDate = Date;
function pinClock(isoLocal) {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(isoLocal);
  if (!m) throw new Error(`bad pinned time: ${isoLocal}`);
  const pinned = new RealDate(+m[1], +m[2] - 1, +m[3], +(m[4] ?? 0), +(m[5] ?? 0), +(m[6] ?? 0));
  globalThis.Date = class extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(pinned.getTime());
      else super(...args);
    }
  };
}

const results = [];
for (const t of templates) {
  const source = readFileSync(join(dirname(templatesPath), t.file), "utf8");
  let template = null;
  let parseError = null;
  try {
    template = new Template(source);
  } catch (e) {
    parseError = String(e?.message ?? e);
  }
  for (const c of fixture.conversations) {
    const entry = { template: t.name, conversation: c.name };
    if (parseError !== null) {
      entry.error = parseError;
      results.push(entry);
      continue;
    }
    const extra = { ...(c.extra ?? {}) };
    const now = extra.strftime_now ?? fixture.now;
    delete extra.strftime_now;  // a clock setting, not a template variable
    const items = {
      messages: c.messages,
      tools: c.tools ? c.tools.map((name) => fixture.tools[name]) : null,
      add_generation_prompt: c.add_generation_prompt ?? true,
      bos_token: t.bos_token,
      eos_token: t.eos_token,
      ...extra,
    };
    try {
      if (now) pinClock(now);
      entry.output = template.render(items);
    } catch (e) {
      entry.error = String(e?.message ?? e);
    } finally {
      globalThis.Date = RealDate;
    }
    results.push(entry);
  }
}

const text = JSON.stringify({ results }, null, 1);
if (outPath) writeFileSync(outPath, text);
else process.stdout.write(text + "\n");
