import json, os, random, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
random.seed(11)
tmpl_src = open(os.path.join(os.path.dirname(__file__), '..', 'qwen3_chat_template.jinja')).read()  # Qwen3's tokenizer_config.json chat_template
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.filters['tojson'] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
tmpl = env.from_string(tmpl_src)
texts = ["Hello", "", "\n", "What is 2+2?", "héllo wörld ✓", "line1\nline2\n", "\n\nleading", "trailing\n\n", "<tool_response>\nwrapped\n</tool_response>", "tab\there", "中文内容", "quote \" and \\ backslash"]
reasons = ["Let me think.", "\nstep 1\nstep 2\n", "short", "多步推理", "a\n\nb"]
def rargs():
    c = random.randint(0, 5)
    if c == 0: return {}
    if c == 1: return {"guess": random.choice(["apple", "pêche", "a\"b", "x\ny"])}
    if c == 2: return {"n": random.choice([1, -7, 3.5, 1e-05, 1e16, 0.1, 12345678901234567890, True, None])}
    if c == 3: return {"z": [1, {"b": 2, "a": [None, "s"]}], "a": "first?"}
    if c == 4: return json.dumps({"raw": "string args"})  # arguments as a string
    return {"nested": {"deep": {"deeper": ["\u2028", "\u0001", "/", "é"]}}}
def rtool():
    return {"type": "function", "function": {"name": random.choice(["guess", "move", "calc"]), "description": random.choice(["Guess.", "Move — fast.", "Calc \"x\"."]), "parameters": {"type": "object", "properties": {"x": {"type": "number", "minimum": random.choice([0, 0.5, -1e-7])}}, "required": ["x"]}}}
cases = []
for n in range(int(sys.argv[1])):
    msgs = []
    if random.random() < 0.5: msgs.append({"role": "system", "content": random.choice(texts)})
    for t in range(random.randint(1, 5)):
        r = random.random()
        if r < 0.35:
            msgs.append({"role": "user", "content": random.choice(texts)})
        elif r < 0.75:
            m = {"role": "assistant"}
            c = random.random()
            if c < 0.2: m["content"] = None
            elif c < 0.4: m["content"] = "<think>\n" + random.choice(reasons) + "\n</think>\n\n" + random.choice(texts)
            else: m["content"] = random.choice(texts)
            if random.random() < 0.4: m["reasoning_content"] = random.choice(reasons)
            if random.random() < 0.5:
                m["tool_calls"] = [{"type": "function", "function": {"name": random.choice(["guess", "move"]), "arguments": rargs()}} for _ in range(random.randint(1, 3))]
            msgs.append(m)
        elif r < 0.95:
            for _ in range(random.randint(1, 3)):
                msgs.append({"role": "tool", "name": "guess", "content": random.choice(texts)})
        else:
            msgs.append({"role": "system", "content": random.choice(texts)})
    tools = [rtool() for _ in range(random.randint(1, 3))] if random.random() < 0.5 else None
    agp = random.random() < 0.5
    kw = random.choice([{}, {"enable_thinking": True}, {"enable_thinking": False}])
    rendered = tmpl.render(messages=msgs, tools=tools, add_generation_prompt=agp, **kw)
    cases.append({"id": f"jinja2/{n}", "kind": "chat", "messages": msgs, "tools": tools, "add_generation_prompt": agp, "chat_template_kwargs": kw, "rendered": rendered})
for c in cases: print(json.dumps(c, ensure_ascii=False))
