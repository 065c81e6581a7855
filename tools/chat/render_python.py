#!/usr/bin/env python3
"""tools/chat/render_python.py — renders the chat-template fixtures with Python Jinja2 set up the way
Hugging Face transformers sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, its own tojson/raise_exception/strftime_now). Owns the second, development-time oracle:
where @huggingface/jinja (the reference the gtest runs) lacks a feature, the expected output of that pair
comes from here and is committed in tests/data/chat/python_goldens.json. Must not post-process output.

Usage: render_python.py <templates.json> <conversations.json> [out.json]
       render_python.py --goldens <templates.json> <conversations.json> <reference.json> <goldens.json>
The second form writes Python's result for every pair the reference could not render and for every pair
a conversation lists under "reference_differs" (a reference bug on a real template), so that the gtest
can check helium's output for those pairs too.
"""
import json
import re
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_environment(now: datetime) -> ImmutableSandboxedEnvironment:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# transformers' AssistantTracker turns {% generation %} blocks into plain content; the fixtures' templates
# have none, so stripping the tags keeps this script independent of transformers.
GENERATION_TAG = re.compile(r"{%-?\s*(?:end)?generation\s*-?%}")


def render_all(templates_path: Path, conversations_path: Path):
    templates = json.loads(templates_path.read_text(encoding="utf-8"))
    fixture = json.loads(conversations_path.read_text(encoding="utf-8"))
    results = []
    for t in templates:
        source = GENERATION_TAG.sub("", (templates_path.parent / t["file"]).read_text(encoding="utf-8"))
        for c in fixture["conversations"]:
            entry = {"template": t["name"], "conversation": c["name"]}
            extra = dict(c.get("extra", {}))
            now = datetime.fromisoformat(extra.pop("strftime_now", fixture["now"]))
            items = {
                "messages": c["messages"],
                "tools": [fixture["tools"][name] for name in c["tools"]] if "tools" in c else None,
                "add_generation_prompt": c.get("add_generation_prompt", True),
                "bos_token": t["bos_token"],
                "eos_token": t["eos_token"],
                **extra,
            }
            try:
                entry["output"] = make_environment(now).from_string(source).render(**items)
            except Exception as e:  # noqa: BLE001 - every failure is a result to report
                entry["error"] = f"{type(e).__name__}: {e}"
            results.append(entry)
    return results


def main(argv):
    if argv[:1] == ["--goldens"] and len(argv) == 5:
        templates, conversations, reference, goldens = map(Path, argv[1:])
        python = {(r["template"], r["conversation"]): r for r in render_all(templates, conversations)}
        differs = {(t, c["name"]) for c in json.loads(conversations.read_text(encoding="utf-8"))["conversations"]
                   for t in c.get("reference_differs", {})}
        out = []
        for r in json.loads(reference.read_text(encoding="utf-8"))["results"]:
            key = (r["template"], r["conversation"])
            p = python[key]
            if "output" not in p:
                continue
            if "error" in r:
                out.append({**p, "reference_error": r["error"]})
            elif key in differs:
                out.append({**p, "reference_output_differs": True})
        goldens.write_text(json.dumps({"results": out}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return 0
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    text = json.dumps({"results": render_all(Path(argv[0]), Path(argv[1]))}, indent=1, ensure_ascii=False)
    if len(argv) == 3:
        Path(argv[2]).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
